# find_package(weft): the imported target weft::weft (libweft and
# include/weft.h). A host links it and calls the C API in weft.h.
include("${CMAKE_CURRENT_LIST_DIR}/weftTargets.cmake")
