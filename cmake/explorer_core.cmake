# The explorer's core (docs/explorer.md): the library's sources, compiled by Emscripten's em++ to
# WebAssembly, with apps/explorer/core.cpp, the functions the page calls. The tool's build configures
# this project with Emscripten's toolchain (cmake/explorer.cmake) and embeds the result,
# explorer_core.js: one file that holds the WebAssembly as base64 (-sSINGLE_FILE), so that a page
# opened from file:// needs nothing beside it.
#
# em++ has its own C++ library (libc++ 13) and C library (musl) and must not see the system's headers:
# fmt and nlohmann/json, which are headers only here, reach it through a folder of links to those two
# folders alone. ATTN_FMT_INCLUDE and ATTN_JSON_INCLUDE name the folders that hold them.
set(ATTN_FMT_INCLUDE /usr/include CACHE PATH "The folder that holds fmt/")
set(ATTN_JSON_INCLUDE /usr/include CACHE PATH "The folder that holds nlohmann/")
option(ATTN_WARNINGS_AS_ERRORS "Treat compiler warnings as errors" OFF)
set(ATTN_HEADERS ${PROJECT_BINARY_DIR}/headers)
file(MAKE_DIRECTORY ${ATTN_HEADERS})
file(CREATE_LINK ${ATTN_FMT_INCLUDE}/fmt ${ATTN_HEADERS}/fmt SYMBOLIC)
file(CREATE_LINK ${ATTN_JSON_INCLUDE}/nlohmann ${ATTN_HEADERS}/nlohmann SYMBOLIC)

# The processor's measurements (bench/machine.cpp, bench/decode_bench.cpp) use threads, which the core does
# not have; nothing the page calls reaches them. The explorer's own page (render/pages/explorer/) is the tool's to write.
set(ATTN_EXPLORER_SOURCES ${ATTN_CORE_SOURCES})
list(REMOVE_ITEM ATTN_EXPLORER_SOURCES src/bench/machine.cpp src/bench/decode_bench.cpp
            src/render/pages/explorer/explorer.cpp
            ${ATTN_EXPLORER_ASSETS_CPP})
# The page waits for the core after every edit: the code that computes (the engines, the verdict, the
# trace's records and the steps the page draws) is compiled for speed (-O2), the rest, which runs once an
# edit or not at all (the report, the lessons, the text and JSON writers), for size (-Oz). em++ turns an
# -Oz anywhere on a command line into -fno-inline-functions, even before an -O2, so the two are targets
# of their own. The exceptions are WebAssembly's own (-fwasm-exceptions, which Chromium and node 20
# run), not JavaScript's (-fexceptions): with those, every call that may throw went through JavaScript.
# Measured on 64 tokens (docs/explorer.md): all -Oz with JavaScript's exceptions 30-40 ms a run, with
# WebAssembly's 18 ms, split as here 8-11 ms (all -O2: 8 ms, but a page over 2 MB).
set(ATTN_EXPLORER_FAST apps/explorer/core.cpp src/engine/instances.cpp src/trace/record.cpp
                       src/trace/collector.cpp src/trace/trace.cpp src/observe/steps.cpp src/io/load.cpp)
list(REMOVE_ITEM ATTN_EXPLORER_SOURCES ${ATTN_EXPLORER_FAST})
add_library(explorer_settings INTERFACE)
target_include_directories(explorer_settings INTERFACE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR}/generated
                           ${ATTN_HEADERS})
target_compile_definitions(explorer_settings INTERFACE FMT_HEADER_ONLY)
target_compile_options(explorer_settings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                       -Wno-sign-conversion -Wno-missing-field-initializers
                       $<$<BOOL:${ATTN_WARNINGS_AS_ERRORS}>:-Werror> -fwasm-exceptions)
set(explorer_headers <fmt/format.h> <nlohmann/json.hpp> <algorithm> <cmath> <optional> <span> <string>
                     <string_view> <vector>)

# The code compiled for size is a library of its own, linked after the code compiled for speed: where
# both hold a copy of the same inline function (a tensor's index, say), the linker keeps the first.
add_library(explorer_small STATIC ${ATTN_EXPLORER_SOURCES} src/kernel/kernels.cpp src/kernel/isa.cpp
                                  src/kernel/isa_backward.cpp)
target_link_libraries(explorer_small PRIVATE explorer_settings)
set_target_properties(explorer_small PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 16)
set_source_files_properties(${ATTN_UNITY_ALONE} ${ATTN_EXAMPLES_CPP} ${ATTN_REPORT_ASSETS_CPP} src/kernel/isa.cpp
                            src/kernel/isa_backward.cpp PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
# The fast path's kernels in their portable form alone (CMakeLists.txt compiles one per instruction set).
set_source_files_properties(src/kernel/isa.cpp src/kernel/isa_backward.cpp PROPERTIES COMPILE_DEFINITIONS
                            "ATTN_ISA=baseline;ATTN_VBYTES=16;ATTN_OWN_GEMM")
target_compile_options(explorer_small PRIVATE -Oz)
target_precompile_headers(explorer_small PRIVATE ${explorer_headers})

add_executable(explorer_core ${ATTN_EXPLORER_FAST})
target_link_libraries(explorer_core PRIVATE explorer_settings explorer_small)
set_target_properties(explorer_core PROPERTIES SUFFIX .js)
target_compile_options(explorer_core PRIVATE -O2)
target_precompile_headers(explorer_core PRIVATE ${explorer_headers})
# A module the page instantiates (AttnCore()), with exceptions caught (the core reports a bad input by
# throwing), memory that grows, no file system, for the browser and for Node.js (the tests).
target_link_options(explorer_core PRIVATE -fwasm-exceptions -Oz -sSINGLE_FILE=1 -sMODULARIZE=1 -sEXPORT_NAME=AttnCore
                    -sENVIRONMENT=web,node -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=2GB -sFILESYSTEM=0
                    -sEXPORTED_FUNCTIONS=_attn_explore,_attn_result,_attn_values,_attn_value_count,_attn_explain,_attn_explain_grad,_attn_examples,_attn_features,_malloc,_free
                    -sEXPORTED_RUNTIME_METHODS=ccall,cwrap,UTF8ToString,HEAPF64,HEAPU32)
