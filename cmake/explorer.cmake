# The explorer's core for `attn-trace explore` (docs/explorer.md): this project's library compiled to
# WebAssembly by Emscripten (cmake/explorer_core.cmake), built here as a project of its own in
# explorer/ of the build folder, and embedded in the tool as the text of explorer_core.js.
#
# ATTN_EXPLORER_CORE names an explorer_core.js built already (scripts/check.sh hands the sanitizer build
# the release build's, so that CI compiles it once). Without it and without Emscripten's emcmake, the
# tool is built with no core, and `explore` says how to get one.
option(ATTN_EXPLORER "Build the explorer's WebAssembly core with Emscripten, when it is installed" ON)
set(ATTN_EXPLORER_CORE "" CACHE FILEPATH "An explorer_core.js built already, to embed instead of building one")

set(ATTN_EXPLORER_CORE_FILE "")
if(ATTN_EXPLORER_CORE)
  if(NOT EXISTS ${ATTN_EXPLORER_CORE})
    message(FATAL_ERROR "ATTN_EXPLORER_CORE=${ATTN_EXPLORER_CORE}: no such file")
  endif()
  set(ATTN_EXPLORER_CORE_FILE ${ATTN_EXPLORER_CORE})
elseif(ATTN_EXPLORER)
  find_program(ATTN_EMCMAKE emcmake)
  if(ATTN_EMCMAKE)
    include(ExternalProject)
    find_path(ATTN_FMT_INCLUDE fmt/format.h REQUIRED)
    find_path(ATTN_JSON_INCLUDE nlohmann/json.hpp REQUIRED)
    set(explorer_bin ${PROJECT_BINARY_DIR}/explorer)
    set(ATTN_EXPLORER_CORE_FILE ${explorer_bin}/explorer_core.js)
    # Debian's em++ runs its JavaScript optimiser with node and Debian's node modules (acorn), which a
    # node installed elsewhere does not look for.
    set(em_env ${CMAKE_COMMAND} -E env NODE_PATH=/usr/share/nodejs)
    ExternalProject_Add(explorer_core_build
      SOURCE_DIR ${PROJECT_SOURCE_DIR}
      BINARY_DIR ${explorer_bin}
      CONFIGURE_COMMAND ${em_env} ${ATTN_EMCMAKE} ${CMAKE_COMMAND} -S ${PROJECT_SOURCE_DIR} -B ${explorer_bin}
                        -DCMAKE_BUILD_TYPE=Release -DATTN_WARNINGS_AS_ERRORS=${ATTN_WARNINGS_AS_ERRORS}
                        -DATTN_FMT_INCLUDE=${ATTN_FMT_INCLUDE} -DATTN_JSON_INCLUDE=${ATTN_JSON_INCLUDE}
      BUILD_COMMAND ${em_env} ${CMAKE_COMMAND} --build ${explorer_bin} --target explorer_core
      # Its own build decides what changed: the library's sources are the tool's.
      BUILD_ALWAYS ON
      BUILD_BYPRODUCTS ${ATTN_EXPLORER_CORE_FILE}
      INSTALL_COMMAND ""
      USES_TERMINAL_BUILD ON)
  else()
    message(STATUS "emcmake not found: the tool is built without the explorer's core "
                   "(install Debian's emscripten, as scripts/setup.sh does, for `attn-trace explore`)")
  endif()
endif()

# apps/attn-trace/explorer_core.cpp: the core's text between two symbols (an assembler .incbin, so that
# 1.5 MB of JavaScript is not a C++ string for the compiler to read), or no core.
set(ATTN_EXPLORER_CORE_CPP ${PROJECT_BINARY_DIR}/generated/explorer_core.cpp)
if(ATTN_EXPLORER_CORE_FILE)
  set(ATTN_HAS_EXPLORER_CORE 1)
else()
  set(ATTN_HAS_EXPLORER_CORE 0)
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/explorer_core.cpp.in ${ATTN_EXPLORER_CORE_CPP} @ONLY)
if(ATTN_EXPLORER_CORE_FILE)
  set_source_files_properties(${ATTN_EXPLORER_CORE_CPP} PROPERTIES OBJECT_DEPENDS ${ATTN_EXPLORER_CORE_FILE})
endif()
