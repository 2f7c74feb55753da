# Writes OUT, a C++ source that holds every DATA_DIR/*.json as a named string, for `attn-trace example`.
# The name of data/the_cat_sat.json is "the-cat-sat".
set(body "#include \"io/examples.hpp\"\n\nnamespace attn {\n\nconst std::vector<Example>& examples() {\n  static const std::vector<Example> all = {\n")
file(GLOB FILES ${DATA_DIR}/*.json)
list(SORT FILES)
foreach(file IN LISTS FILES)
  get_filename_component(stem ${file} NAME_WE)
  string(REPLACE "_" "-" name ${stem})
  file(READ ${file} text)
  # A raw string literal keeps the file byte for byte; the delimiter cannot occur in JSON text.
  string(APPEND body "    {\"${name}\", R\"attn_json(${text})attn_json\"},\n")
endforeach()
string(APPEND body "  };\n  return all;\n}\n\n}  // namespace attn\n")
file(WRITE ${OUT} "${body}")
