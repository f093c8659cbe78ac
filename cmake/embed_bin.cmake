# Embeds a binary file into C as bytes: cmake -DIN=file -DOUT=header
# -DNAME=identifier -P embed_bin.cmake writes
#   static const unsigned char NAME[] = {0x.., ...};
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n  "
       bytes "${bytes}")
get_filename_component(base "${IN}" NAME)
file(WRITE "${OUT}.tmp"
  "/* generated from ${base} by cmake/embed_bin.cmake */\n"
  "static const unsigned char ${NAME}[] = {\n  ${bytes}};\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
file(REMOVE "${OUT}.tmp")
