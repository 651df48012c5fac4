# Third-party libraries, all from Debian's packages (scripts/install-deps.sh).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
pkg_check_modules(PROTOBUF_C REQUIRED IMPORTED_TARGET libprotobuf-c)
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq)
pkg_check_modules(MSGPACK REQUIRED IMPORTED_TARGET msgpack)
pkg_check_modules(SQLITE3 REQUIRED IMPORTED_TARGET sqlite3)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
pkg_check_modules(CMOCKA IMPORTED_TARGET cmocka)
find_program(PROTOC_C protoc-c REQUIRED)
# oneDNN (Debian's libdnnl-dev ships no pkg-config file): CPU convolutions
# and pools, for libzflow_runtime only. Debian builds it on OpenMP, whose
# per-thread team size the kernels set (docs/design.md, "Threads").
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.h REQUIRED)
find_library(DNNL_LIBRARY dnnl REQUIRED)
add_library(zflow_dnnl INTERFACE IMPORTED)
target_include_directories(zflow_dnnl INTERFACE ${DNNL_INCLUDE_DIR})
target_link_libraries(zflow_dnnl INTERFACE ${DNNL_LIBRARY})
find_package(OpenMP REQUIRED COMPONENTS C)
