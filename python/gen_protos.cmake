# Generates zflow/_proto/*_pb2.py from proto/*.proto with protoc, then makes
# the generated imports package-relative ("import graph_pb2 as ..." becomes
# "from . import graph_pb2 as ..."), so the modules import as zflow._proto.*.
# Run as: cmake -DPROTOC=... -DPROTO_DIR=... -DOUT_DIR=... -P gen_protos.cmake
get_filename_component(PROTO_DIR "${PROTO_DIR}" ABSOLUTE)
get_filename_component(OUT_DIR "${OUT_DIR}" ABSOLUTE)
file(GLOB protos ${PROTO_DIR}/*.proto)
file(MAKE_DIRECTORY ${OUT_DIR})
execute_process(COMMAND ${PROTOC} --python_out=${OUT_DIR} -I${PROTO_DIR} ${protos}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "protoc --python_out failed (${rc})")
endif()
foreach(p ${protos})
  get_filename_component(base ${p} NAME_WE)
  set(f ${OUT_DIR}/${base}_pb2.py)
  file(READ ${f} text)
  string(REGEX REPLACE "\nimport ([A-Za-z0-9_]+_pb2) as " "\nfrom . import \\1 as " text "${text}")
  file(WRITE ${f} "${text}")
endforeach()
file(WRITE ${OUT_DIR}/__init__.py
     "# Generated at build time from proto/*.proto by protoc (python/gen_protos.cmake).\n")
