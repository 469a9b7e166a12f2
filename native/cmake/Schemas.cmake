# The ops are those of schemas/*.toml (the repository's, which the sdist carries beside native/).
# ort/schema.h in the build tree holds what the glue takes from them (op list, domain, each op's
# inputs and outputs, attribute defaults), regenerated whenever a schema or the script changes.
# Python 3.11 for tomllib.
find_package(Python 3.11 COMPONENTS Interpreter REQUIRED)
file(GLOB OAO_SCHEMAS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/../schemas/*.toml)
if(NOT OAO_SCHEMAS)
  message(FATAL_ERROR "no schemas in ${PROJECT_SOURCE_DIR}/../schemas")
endif()
set(OAO_GENERATED_DIR ${CMAKE_BINARY_DIR}/generated)
set(OAO_SCHEMA_HEADER ${OAO_GENERATED_DIR}/ort/schema.h)
add_custom_command(
  OUTPUT ${OAO_SCHEMA_HEADER}
  COMMAND "${Python_EXECUTABLE}" ${CMAKE_CURRENT_LIST_DIR}/schema_header.py ${OAO_SCHEMA_HEADER} ${OAO_SCHEMAS}
  DEPENDS ${CMAKE_CURRENT_LIST_DIR}/schema_header.py ${OAO_SCHEMAS}
  COMMENT "Generating ort/schema.h from schemas/*.toml"
  VERBATIM)
