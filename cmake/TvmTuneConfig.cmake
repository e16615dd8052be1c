# find_package(TvmTune): tvm-compile at build time.
#
#   tvm_tune_add_library(NAME DB <tuning.db> [TARGET <target>] [DEVICE <fingerprint>]
#                        WORKLOADS <workload> <symbol> [<workload> <symbol> ...]
#                        [STRICT] [NO_FALLBACK])
#
# builds NAME.a and NAME.h from the database's best records (tvm-compile) into
# ${CMAKE_CURRENT_BINARY_DIR}/tvm-tune and defines the imported library NAME, which carries the
# header's directory and the libraries the kernels need.  The library is built again when the
# database file changes (tvm-tune and tvm-tracker checkpoint it when they close it).  DB may also
# be a PostgreSQL URI (postgresql://builder@host/db, the password in ~/.pgpass): a server has no
# file to watch, so the library is then built again at every build.
#
#   tvm_tune_add_network(NAME MODEL <model.onnx> [DB <tuning.db>] [TARGET <target>]
#                        [DEVICE <fingerprint>] [SHAPES <input>=<dims> ...]
#                        [LAYOUT channels-last|model] [STRICT] [NO_FALLBACK])
#
# builds a whole network (tvm-compile --model): NAME.a and NAME.h with NAME_run(inputs...,
# outputs...), the weights embedded, rebuilt when the model or the database changes.  Without DB
# every task runs its default schedule (a warning at build time).  LAYOUT must be the one the
# tasks were tuned in (tvm-tune run --model --layout; default channels-last).
get_filename_component(_tvm_tune_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
find_program(TVM_COMPILE_EXECUTABLE tvm-compile HINTS "${_tvm_tune_prefix}/bin" REQUIRED)
set(TvmTune_FOUND TRUE)

# Appends TARGET, DEVICE, STRICT and NO_FALLBACK (the caller's parsed TT_ options) to list var.
macro(_tvm_tune_options var)
  if(TT_TARGET)
    list(APPEND ${var} --target "${TT_TARGET}")
  endif()
  if(TT_DEVICE)
    list(APPEND ${var} --device "${TT_DEVICE}")
  endif()
  if(TT_STRICT)
    list(APPEND ${var} --strict)
  endif()
  if(TT_NO_FALLBACK)
    list(APPEND ${var} --no-fallback)
  endif()
endmacro()

# The --db value for TT_DB in out_db and what the build depends on in out_deps: a SQLite file
# (absolute), or a PostgreSQL URI as it is with a stamp that is touched at every build.
function(_tvm_tune_db name out_db out_deps)
  if(TT_DB MATCHES "^postgres(ql)?://")
    set(stamp "${CMAKE_CURRENT_BINARY_DIR}/tvm-tune/${name}.db-stamp")
    add_custom_target(${name}_tvm_db_stamp
      COMMAND "${CMAKE_COMMAND}" -E touch "${stamp}"
      BYPRODUCTS "${stamp}"
      COMMENT "tvm-tune: ${name} reads a database server; checking it again")
    set(${out_db} "${TT_DB}" PARENT_SCOPE)
    set(${out_deps} "${stamp};${name}_tvm_db_stamp" PARENT_SCOPE)
  else()
    string(REGEX REPLACE "^sqlite:" "" file "${TT_DB}")
    get_filename_component(db "${file}" ABSOLUTE)
    set(${out_db} "${db}" PARENT_SCOPE)
    set(${out_deps} "${db}" PARENT_SCOPE)
  endif()
endfunction()

# The rule that runs tvm-compile ARGN into DIR/NAME.* when DEPS change, and the imported NAME.
function(_tvm_tune_compile name dir comment deps)
  add_custom_command(
    OUTPUT "${dir}/${name}.a" "${dir}/${name}.so" "${dir}/${name}.h" "${dir}/${name}.pc"
    COMMAND "${TVM_COMPILE_EXECUTABLE}" ${ARGN}
    DEPENDS ${deps}
    COMMENT "${comment}"
    VERBATIM)
  add_custom_target(${name}_tvm_compile DEPENDS "${dir}/${name}.a" "${dir}/${name}.h")
  file(MAKE_DIRECTORY "${dir}")
  add_library(${name} STATIC IMPORTED GLOBAL)
  # Host kernels carry their thread pool; a cross target's call the device's libgomp.
  set(libs "m;dl;pthread")
  if(TT_TARGET MATCHES "-mtriple=")
    set(libs "gomp;m;dl;pthread")
  endif()
  set_target_properties(${name} PROPERTIES
    IMPORTED_LOCATION "${dir}/${name}.a"
    INTERFACE_INCLUDE_DIRECTORIES "${dir}"
    INTERFACE_LINK_LIBRARIES "${libs}")
  add_dependencies(${name} ${name}_tvm_compile)
endfunction()

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
  _tvm_tune_db(${name} db db_deps)
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/tvm-tune")
  set(args --db "${db}" -o "${dir}/${name}" --quiet)
  _tvm_tune_options(args)
  math(EXPR last "${n} - 1")
  foreach(i RANGE 0 ${last} 2)
    math(EXPR j "${i} + 1")
    list(GET TT_WORKLOADS ${i} workload)
    list(GET TT_WORKLOADS ${j} symbol)
    list(APPEND args --workload "${workload}" --symbol "${symbol}")
  endforeach()
  _tvm_tune_compile(${name} "${dir}" "tvm-compile ${name} from ${db}" "${db_deps}" ${args})
endfunction()

function(tvm_tune_add_network name)
  cmake_parse_arguments(TT "STRICT;NO_FALLBACK" "MODEL;DB;TARGET;DEVICE;LAYOUT" "SHAPES" ${ARGN})
  if(NOT TT_MODEL)
    message(FATAL_ERROR "tvm_tune_add_network(${name}): MODEL is needed")
  endif()
  get_filename_component(model "${TT_MODEL}" ABSOLUTE)
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/tvm-tune")
  set(args --model "${model}" -o "${dir}/${name}" --quiet)
  set(deps "${model}")
  if(TT_DB)
    _tvm_tune_db(${name} db db_deps)
    list(APPEND args --db "${db}")
    list(APPEND deps ${db_deps})
  endif()
  _tvm_tune_options(args)
  foreach(shape IN LISTS TT_SHAPES)
    list(APPEND args --shape "${shape}")
  endforeach()
  if(TT_LAYOUT)
    list(APPEND args --layout "${TT_LAYOUT}")
  endif()
  _tvm_tune_compile(${name} "${dir}" "tvm-compile network ${name} from ${model}" "${deps}"
                    ${args})
endfunction()
