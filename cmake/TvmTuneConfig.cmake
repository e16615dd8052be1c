# find_package(TvmTune): tvm-compile at build time.
#
#   tvm_tune_add_library(NAME DB <tuning.db> [TARGET <target>] [DEVICE <fingerprint>]
#                        WORKLOADS <workload> <symbol> [<workload> <symbol> ...]
#                        [STRICT] [NO_FALLBACK])
#
# builds NAME.a and NAME.h from the database's best records (tvm-compile) into
# ${CMAKE_CURRENT_BINARY_DIR}/tvm-tune and defines the imported library NAME, which carries the
# header's directory and the libraries the kernels need.  The library is built again when the
# database file changes (tvm-tune and tvm-tracker checkpoint it when they close it).
get_filename_component(_tvm_tune_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
find_program(TVM_COMPILE_EXECUTABLE tvm-compile HINTS "${_tvm_tune_prefix}/bin" REQUIRED)
set(TvmTune_FOUND TRUE)

function(tvm_tune_add_library name)
  cmake_parse_arguments(TT "STRICT;NO_FALLBACK" "DB;TARGET;DEVICE" "WORKLOADS" ${ARGN})
  if(NOT TT_DB OR NOT TT_WORKLOADS)
    message(FATAL_ERROR "tvm_tune_add_library(${name}): DB and WORKLOADS are needed")
  endif()
  list(LENGTH TT_WORKLOADS n)
  math(EXPR odd "${n} % 2")
  if(odd)
    message(FATAL_ERROR "tvm_tune_add_library(${name}): WORKLOADS takes workload/symbol pairs")
  endif()
  get_filename_component(db "${TT_DB}" ABSOLUTE)
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/tvm-tune")
  set(args --db "${db}" -o "${dir}/${name}" --quiet)
  if(TT_TARGET)
    list(APPEND args --target "${TT_TARGET}")
  endif()
  if(TT_DEVICE)
    list(APPEND args --device "${TT_DEVICE}")
  endif()
  if(TT_STRICT)
    list(APPEND args --strict)
  endif()
  if(TT_NO_FALLBACK)
    list(APPEND args --no-fallback)
  endif()
  math(EXPR last "${n} - 1")
  foreach(i RANGE 0 ${last} 2)
    math(EXPR j "${i} + 1")
    list(GET TT_WORKLOADS ${i} workload)
    list(GET TT_WORKLOADS ${j} symbol)
    list(APPEND args --workload "${workload}" --symbol "${symbol}")
  endforeach()
  add_custom_command(
    OUTPUT "${dir}/${name}.a" "${dir}/${name}.so" "${dir}/${name}.h" "${dir}/${name}.pc"
    COMMAND "${TVM_COMPILE_EXECUTABLE}" ${args}
    DEPENDS "${db}"
    COMMENT "tvm-compile ${name} from ${db}"
    VERBATIM)
  add_custom_target(${name}_tvm_compile DEPENDS "${dir}/${name}.a" "${dir}/${name}.h")
  file(MAKE_DIRECTORY "${dir}")
  add_library(${name} STATIC IMPORTED GLOBAL)
  set_target_properties(${name} PROPERTIES
    IMPORTED_LOCATION "${dir}/${name}.a"
    INTERFACE_INCLUDE_DIRECTORIES "${dir}"
    INTERFACE_LINK_LIBRARIES "gomp;m;dl;pthread")
  add_dependencies(${name} ${name}_tvm_compile)
endfunction()
