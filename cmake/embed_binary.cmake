# cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed_binary.cmake
# Writes OUT: `const unsigned char NAME[]` with IN's bytes and `const unsigned long NAME_size`
# (an object that tvm-tune links into the libraries it writes: codegen/pool.c).
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR size "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUT}.tmp" "/* Generated from ${IN} by cmake/embed_binary.cmake. */\n"
     "extern const unsigned char ${NAME}[];\nextern const unsigned long ${NAME}_size;\n"
     "const unsigned char ${NAME}[] = {\n    ${bytes}};\n"
     "const unsigned long ${NAME}_size = ${size};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
