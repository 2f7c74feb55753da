# The library's sources and the files the build generates for it, for the tool's build (CMakeLists.txt)
# and for the explorer's core, which Emscripten compiles from the same files (cmake/explorer_core.cmake).

# The bundled examples (data/*.json) are compiled into the binary for `attn-trace example`.
file(GLOB ATTN_EXAMPLE_FILES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/data/*.json)
set(ATTN_EXAMPLES_CPP ${PROJECT_BINARY_DIR}/generated/examples.cpp)
add_custom_command(
  OUTPUT ${ATTN_EXAMPLES_CPP}
  COMMAND ${CMAKE_COMMAND} -DOUT=${ATTN_EXAMPLES_CPP} -DDATA_DIR=${PROJECT_SOURCE_DIR}/data
          -P ${CMAKE_CURRENT_LIST_DIR}/embed_examples.cmake
  DEPENDS ${ATTN_EXAMPLE_FILES} ${CMAKE_CURRENT_LIST_DIR}/embed_examples.cmake
  COMMENT "Embedding data/*.json")
# The HTML report's and the explorer's templates, style sheets and scripts (src/render/pages/report/,
# src/render/pages/explorer/) are compiled in the same way: attn_embed_page(PAGE NAME:FILE ...) writes
# generated/PAGE_assets.cpp, whose strings render/pages/PAGE/PAGE_assets.hpp declares, and sets
# ATTN_<PAGE>_ASSETS_CPP to it.
function(attn_embed_page page)
  set(dir ${PROJECT_SOURCE_DIR}/src/render/pages/${page})
  set(files "")
  foreach(pair IN LISTS ARGN)
    string(REGEX REPLACE "^[^:]*:" "" file "${pair}")
    list(APPEND files ${dir}/${file})
  endforeach()
  string(REPLACE ";" "," assets "${ARGN}")
  string(TOUPPER ${page} upper)
  set(out ${PROJECT_BINARY_DIR}/generated/${page}_assets.cpp)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DASSET_DIR=${dir} -DHEADER=render/pages/${page}/${page}_assets.hpp
            "-DASSETS=${assets}" -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed_assets.cmake
    DEPENDS ${files} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed_assets.cmake
    COMMENT "Embedding the ${page}'s HTML, CSS and JavaScript")
  set(ATTN_${upper}_ASSETS_CPP ${out} PARENT_SCOPE)
endfunction()
attn_embed_page(report report_template:report.html report_css:report.css report_js:report.js
                report_walk_js:report_walk.js report_backward_css:report_backward.css
                report_backward_js:report_backward.js)
attn_embed_page(explorer explorer_template:explorer.html explorer_css:explorer.css explorer_link_js:explorer_link.js
                explorer_mask_js:explorer_mask.js explorer_edits_js:explorer_edits.js
                explorer_controls_js:explorer_controls.js explorer_structure_js:explorer_structure.js
                explorer_view_js:explorer_view.js explorer_js:explorer.js)
# Where `cmake --install` puts the examples (below), for the hint of a missing input that is one of them.
include(GNUInstallDirs)
set(ATTN_INSTALLED_EXAMPLES ${CMAKE_INSTALL_FULL_DATADIR}/attn-trace/examples)
configure_file(cmake/version.hpp.in ${PROJECT_BINARY_DIR}/generated/attn/version.hpp @ONLY)

set(ATTN_CORE_SOURCES
  src/io/load.cpp
  src/io/load_range.cpp
  src/io/features.cpp
  src/json/parse.cpp
  src/json/fast_parser.cpp
  src/json/error.cpp
  src/json/pointer.cpp
  src/json/reader.cpp
  src/json/quoted.cpp
  src/text/nearest.cpp
  src/text/utf8.cpp
  src/text/visible.cpp
  src/io/examples.cpp
  src/io/new_input.cpp
  src/io/steps_json.cpp
  src/io/trace_write.cpp
  src/io/decode_write.cpp
  src/io/trace_read.cpp
  src/io/trace_read_decode.cpp
  src/io/properties_json.cpp
  src/io/output.cpp
  src/io/read.cpp
  src/io/scaling_json.cpp
  src/io/mistake_json.cpp
  src/io/explain_json.cpp
  src/formats/npy.cpp
  src/formats/safetensors.cpp
  src/formats/json_dump.cpp
  src/formats/dump_folder.cpp
  src/formats/dumped_steps.cpp
  src/formats/import_layer.cpp
  src/io/diff_json.cpp
  src/io/bench_json.cpp
  src/model/mask.cpp
  src/model/positions.cpp
  src/model/slice.cpp
  src/lessons/scaling.cpp
  src/observe/step_texts.cpp
  src/observe/steps.cpp
  src/observe/step_sets.cpp
  src/bench/random_input.cpp
  src/bench/sweep.cpp
  src/bench/flops.cpp
  src/bench/reference.cpp
  src/bench/resident_memory.cpp
  src/bench/machine.cpp
  src/bench/timing.cpp
  src/bench/bench_run.cpp
  src/bench/decode_bench.cpp
  src/trace/trace.cpp
  src/trace/collector.cpp
  src/engine/instances.cpp
  src/trace/record.cpp
  src/trace/decode.cpp
  src/lessons/properties.cpp
  src/lessons/catalogue.cpp
  src/lessons/explain.cpp
  src/lessons/mistaken_forward.cpp
  src/lessons/mistaken_backward.cpp
  src/lessons/mistakes.cpp
  src/lessons/explain.cpp
  src/lessons/explain_gradient.cpp
  src/check/diagnosis.cpp
  src/check/diff.cpp
  src/check/judge.cpp
  src/check/readings.cpp
  src/render/pages/trace/terminal.cpp
  src/render/pages/trace/table.cpp
  src/render/pages/trace/flash_section.cpp
  src/render/pages/trace/heatmap.cpp
  src/render/pages/trace/compare_section.cpp
  src/render/pages/trace/decode_section.cpp
  src/render/pages/properties_page.cpp
  src/render/draw/colormap.cpp
  src/render/draw/panel.cpp
  src/render/draw/text.cpp
  src/render/draw/escape.cpp
  src/render/draw/axis.cpp
  src/render/draw/notes.cpp
  src/render/pages/svg.cpp
  src/render/pages/document.cpp
  src/render/pages/diff_page.cpp
  src/render/pages/report/writer.cpp
  src/render/pages/report/html.cpp
  src/render/pages/report/legend.cpp
  src/render/pages/report/budget.cpp
  src/render/pages/report/pipeline_svg.cpp
  src/render/pages/report/page_data.cpp
  src/render/pages/report/sections.cpp
  src/render/pages/report/sections_backward.cpp
  src/render/pages/report/decode_section.cpp
  src/render/pages/report/report.cpp
  src/render/pages/explorer/explorer.cpp
  src/render/pages/scaling_page.cpp
  src/render/draw/page.cpp
  src/render/pages/trace/mistake_section.cpp
  src/render/pages/explain_page.cpp
  src/render/pages/explain_gradient_page.cpp
  src/render/pages/bench.cpp
  src/render/pages/bench_decode.cpp
  src/render/pages/steps_page.cpp
  src/text/number.cpp
  src/request/request.cpp
  src/request/decoding.cpp
  src/request/memory.cpp
  src/request/terminal_caps.cpp
  src/request/explaining.cpp
  src/request/diffing.cpp
  src/request/command_options.cpp
  ${ATTN_EXAMPLES_CPP}
  ${ATTN_REPORT_ASSETS_CPP}
  ${ATTN_EXPLORER_ASSETS_CPP})

# Files whose file-local names meet another's, compiled on their own in a unity build (CMakeLists.txt).
set(ATTN_UNITY_ALONE
  src/bench/bench_run.cpp
  src/bench/decode_bench.cpp
  src/check/diagnosis.cpp
  src/check/diff.cpp
  src/check/judge.cpp
  src/check/readings.cpp
  src/formats/import_layer.cpp
  src/formats/json_dump.cpp
  src/formats/safetensors.cpp
  src/io/explain_json.cpp
  src/lessons/explain.cpp
  src/lessons/mistaken_forward.cpp
  src/render/pages/bench.cpp
  src/render/pages/bench_decode.cpp
  src/render/pages/explain_gradient_page.cpp)
