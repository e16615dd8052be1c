# cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed_text.cmake
# Writes OUT: `const char NAME[]`, IN's bytes and a terminating zero (a text tvm-compile writes
# into the sources it generates: deploy/cl_net_runtime.c).
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUT}.tmp" "/* Generated from ${IN} by cmake/embed_text.cmake. */\n"
     "extern const char ${NAME}[];\nconst char ${NAME}[] = {\n    ${bytes}0x00};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
