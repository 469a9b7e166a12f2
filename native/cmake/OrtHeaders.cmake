# Finds ONNX Runtime's C/C++ headers, which the onnxruntime wheel does not ship.
# Order: ORT_INCLUDE_DIR (cache or environment), the system, then Debian's libonnxruntime-dev
# fetched into the build tree with a private apt configuration (no root, no change to the system).
set(_ort_probe onnxruntime_cxx_api.h)

if(NOT ORT_INCLUDE_DIR AND DEFINED ENV{ORT_INCLUDE_DIR})
  set(ORT_INCLUDE_DIR "$ENV{ORT_INCLUDE_DIR}")
endif()
if(ORT_INCLUDE_DIR)
  if(NOT EXISTS "${ORT_INCLUDE_DIR}/${_ort_probe}")
    message(FATAL_ERROR "ORT_INCLUDE_DIR=${ORT_INCLUDE_DIR} has no ${_ort_probe}")
  endif()
  return()
endif()

find_path(ORT_INCLUDE_DIR ${_ort_probe} PATH_SUFFIXES onnxruntime onnxruntime/core/session)
if(ORT_INCLUDE_DIR)
  return()
endif()
unset(ORT_INCLUDE_DIR CACHE)

set(_apt_root "${CMAKE_BINARY_DIR}/ort-headers")
set(_inc "${_apt_root}/root/usr/include/onnxruntime")
if(NOT EXISTS "${_inc}/${_ort_probe}")
  set(_help "Install ONNX Runtime's C++ headers (Debian trixie: `apt-get install libonnxruntime-dev`, or unpack the onnxruntime release archive) and pass -DORT_INCLUDE_DIR=<dir containing ${_ort_probe}> (or set the ORT_INCLUDE_DIR environment variable).")
  find_program(_apt_get apt-get)
  find_program(_dpkg dpkg)
  if(NOT _apt_get OR NOT _dpkg)
    message(FATAL_ERROR "ONNX Runtime headers not found and apt-get/dpkg are not available to fetch them. ${_help}")
  endif()
  message(STATUS "Fetching ONNX Runtime headers from Debian's libonnxruntime-dev (trixie)")
  file(MAKE_DIRECTORY "${_apt_root}/lists/partial" "${_apt_root}/archives/partial" "${_apt_root}/sources")
  file(WRITE "${_apt_root}/sources/trixie.sources"
    "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie\nComponents: main\n"
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
  set(_apt_opts
    -o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=${_apt_root}/sources"
    -o "Dir::State::Lists=${_apt_root}/lists" -o "Dir::Cache=${_apt_root}"
    -o "Dir::Cache::Archives=${_apt_root}/archives" -o "Debug::NoLocking=1"
    -o "APT::Sandbox::User=root")
  execute_process(COMMAND ${_apt_get} ${_apt_opts} -q update
    RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_VARIABLE _err)
  if(_rc EQUAL 0)
    execute_process(COMMAND ${_apt_get} ${_apt_opts} -q download libonnxruntime-dev
      WORKING_DIRECTORY "${_apt_root}" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_VARIABLE _err)
  endif()
  file(GLOB _debs "${_apt_root}/libonnxruntime-dev_*.deb")
  if(NOT _rc EQUAL 0 OR NOT _debs)
    message(FATAL_ERROR "Could not download libonnxruntime-dev from Debian trixie: ${_err}\n${_help}")
  endif()
  list(GET _debs 0 _deb)
  execute_process(COMMAND ${_dpkg} -x "${_deb}" "${_apt_root}/root" RESULT_VARIABLE _rc ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0 OR NOT EXISTS "${_inc}/${_ort_probe}")
    message(FATAL_ERROR "Could not unpack ${_deb}: ${_err}\n${_help}")
  endif()
endif()
set(ORT_INCLUDE_DIR "${_inc}" CACHE PATH "ONNX Runtime C/C++ include directory" FORCE)
