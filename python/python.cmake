# Whether to build the Python module tpusim (python/CMakeLists.txt); included
# by the top-level CMakeLists.txt before any library is defined, because the
# static libraries the module links must then be compiled as position-
# independent code. Sets TPU_PYTHON_MODULE.
#
# The interpreter: -DPython3_EXECUTABLE=...; by default Debian's
# /usr/bin/python3 (with python3-numpy, -pandas, -distributed, -pytest), not
# whichever python3 comes first on PATH.
option(TPU_PYTHON "Build the Python module tpusim (pybind11)" ON)
set(TPU_PYTHON_MODULE OFF)
if(TPU_PYTHON)
  if(TPU_SANITIZE OR TPU_FUZZ)
    # A sanitized extension cannot be loaded by an unsanitized interpreter.
    message(STATUS "tpusim Python module: skipped in a sanitizer build (TPU_SANITIZE/TPU_FUZZ)")
  else()
    if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
      set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "Python interpreter for tpusim")
    endif()
    find_package(Python3 COMPONENTS Interpreter Development.Module)
    if(Python3_FOUND)
      find_package(pybind11 2.6 CONFIG QUIET)
    endif()
    if(Python3_FOUND AND pybind11_FOUND)
      message(STATUS "tpusim Python module: for ${Python3_EXECUTABLE} (Python ${Python3_VERSION}), pybind11 ${pybind11_VERSION}")
      set(TPU_PYTHON_MODULE ON)
      set(CMAKE_POSITION_INDEPENDENT_CODE ON)
    else()
      message(STATUS "tpusim Python module: skipped (needs python3-dev and pybind11-dev; -DTPU_PYTHON=OFF silences this)")
    endif()
  endif()
endif()
