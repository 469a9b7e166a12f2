# OpenBLAS for the GEMM-shaped kernels, from the scipy-openblas32 wheel, which ships the library
# and its headers (symbols carry a scipy_ prefix, so it never clashes with NumPy's own copy).
find_package(Python COMPONENTS Interpreter REQUIRED)
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c
          "import scipy_openblas32 as s; print(s.get_include_dir()); print(s.get_lib_dir())"
  OUTPUT_VARIABLE _openblas_dirs RESULT_VARIABLE _rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "scipy-openblas32 is not importable by ${Python_EXECUTABLE}: pip install scipy-openblas32")
endif()
string(REPLACE "\n" ";" _openblas_dirs "${_openblas_dirs}")
list(GET _openblas_dirs 0 OPENBLAS_INCLUDE_DIR)
list(GET _openblas_dirs 1 OPENBLAS_LIB_DIR)

add_library(openblas SHARED IMPORTED)
set_target_properties(openblas PROPERTIES
  IMPORTED_LOCATION "${OPENBLAS_LIB_DIR}/libscipy_openblas.so"
  INTERFACE_INCLUDE_DIRECTORIES "${OPENBLAS_INCLUDE_DIR}")
message(STATUS "OpenBLAS: ${OPENBLAS_LIB_DIR}")
