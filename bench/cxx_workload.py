#!/usr/bin/env python3
"""C++ source for bench/engines.sh's g++ workload: the standard headers <map> <vector>
<string> <regex>, and CLASSES class templates each instantiated over its own types, so
that every one makes g++ instantiate and optimise more library code (what keeps cc1plus
allocating). Deterministic. Usage: cxx_workload.py CLASSES > workload.cpp"""
import sys

CLASS = """
template <typename Key, typename Value>
struct Index{c} {{
    std::map<Key, std::vector<Value>> groups;
    std::regex pattern{{"([a-z]+){c}=([0-9]{{1,{width}}})"}};
    void add(const Key &key, const Value &value) {{ groups[key].push_back(value); }}
    long parse(const std::string &text) {{
        long total = {c};
        for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it)
            total += std::stol((*it)[2]) * {factor} + (long)(*it)[1].length();
        return total;
    }}
    std::string describe() const {{
        std::string out;
        for (const auto &[key, values] : groups)
            out += std::to_string(values.size()) + ":{c};";
        return out;
    }}
}};

struct Item{c} {{ long id; std::string name; }};
inline bool operator<(const Item{c} &a, const Item{c} &b) {{ return a.id < b.id; }}

long use{c}(const std::vector<std::string> &lines)
{{
    Index{c}<{key}, Item{c}> index;
    long total = 0;
    for (size_t i = 0; i < lines.size(); i++) {{
        index.add({make_key}, Item{c}{{(long)i * {factor}, lines[i]}});
        total += index.parse(lines[i]);
    }}
    return total + (long)index.describe().size();
}}
"""

KEYS = [("std::string", "lines[i].substr(0, {n})"), ("long", "(long)(i % {n})"),
        ("int", "(int)lines[i].size() % {n}")]

classes = int(sys.argv[1])
out = sys.stdout
out.write("#include <map>\n#include <regex>\n#include <string>\n#include <vector>\n")
for c in range(classes):
    key, make_key = KEYS[c % len(KEYS)]
    out.write(CLASS.format(c=c, width=c % 5 + 1, factor=c % 13 + 3, key=key,
                           make_key=make_key.format(n=c % 7 + 2)))
out.write("\nlong run_all(const std::vector<std::string> &lines)\n{\n    long total = 0;\n")
for c in range(classes):
    out.write(f"    total += use{c}(lines);\n")
out.write("    return total;\n}\n")
