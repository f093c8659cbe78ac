# Embeds a text file into C as a string: cmake -DIN=file -DOUT=header
# -DNAME=identifier -P embed.cmake writes
#   static const char NAME[] = "...";
# with the file's lines as string literals (a few lines per literal keeps
# every literal short of compilers' limits).
file(READ "${IN}" text)
string(REPLACE "\\" "\\\\" text "${text}")
string(REPLACE "\"" "\\\"" text "${text}")
string(REPLACE "\t" "\\t" text "${text}")
string(REPLACE "\n" "\\n\"\n  \"" text "${text}")
get_filename_component(base "${IN}" NAME)
file(WRITE "${OUT}.tmp"
  "/* generated from ${base} by cmake/embed.cmake: edit ${base}, not this */\n"
  "static const char ${NAME}[] =\n  \"${text}\";\n")
# only touch OUT when it changes, so dependants do not rebuild needlessly
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
file(REMOVE "${OUT}.tmp")
