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
list(GET _openblas_dirs 0 _wheel_include_dir)
list(GET _openblas_dirs 1 _wheel_lib_dir)

# Under `pip install .` the wheel lies in pip's isolated build environment, a new
# /tmp/pip-build-env-XXXX on every install: its path in the compile and link lines would make ninja
# rebuild everything that includes cblas.h, every time. So build against a copy at a fixed place in
# the build tree; ONLY_IF_DIFFERENT leaves files with unchanged content (and their mtimes) alone,
# so only a new OpenBLAS recompiles. The copy also outlives pip's environment, which the build
# tree's libraries load it from (BUILD_RPATH).
set(OPENBLAS_INCLUDE_DIR "${CMAKE_BINARY_DIR}/scipy_openblas32/include")
set(OPENBLAS_LIB_DIR "${CMAKE_BINARY_DIR}/scipy_openblas32/lib")
file(MAKE_DIRECTORY "${OPENBLAS_INCLUDE_DIR}" "${OPENBLAS_LIB_DIR}")
file(GLOB _headers RELATIVE "${_wheel_include_dir}" "${_wheel_include_dir}/*.h")
foreach(_h IN LISTS _headers)
  file(COPY_FILE "${_wheel_include_dir}/${_h}" "${OPENBLAS_INCLUDE_DIR}/${_h}" ONLY_IF_DIFFERENT)
endforeach()
file(COPY_FILE "${_wheel_lib_dir}/libscipy_openblas.so" "${OPENBLAS_LIB_DIR}/libscipy_openblas.so"
     ONLY_IF_DIFFERENT)

add_library(openblas SHARED IMPORTED)
set_target_properties(openblas PROPERTIES
  IMPORTED_LOCATION "${OPENBLAS_LIB_DIR}/libscipy_openblas.so"
  INTERFACE_INCLUDE_DIRECTORIES "${OPENBLAS_INCLUDE_DIR}")
message(STATUS "OpenBLAS: ${_wheel_lib_dir} (built against its copy in ${OPENBLAS_LIB_DIR})")
