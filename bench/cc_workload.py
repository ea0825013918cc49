#!/usr/bin/env python3
"""C source for bench/engines.sh's compiler workload: FUNCTIONS functions with loops,
switches and static tables (what keeps gcc -O2's passes busy), and one function calling
them all. Deterministic. Usage: cc_workload.py FUNCTIONS > workload.c"""
import sys

FUNCTION = """
static long table_{f}[64];
long transform_{f}(struct item *items, size_t count, long seed)
{{
    long total = seed ^ {mix};
    for (size_t i = 0; i < count; i++) {{
        struct item *it = &items[i];
        switch ((it->key + {f}) % 7) {{
        case 0: total += it->key * {factor}; break;
        case 1: total ^= (long)(it->weight * {weight}.5); break;
        case 2: total -= (long)strlen(it->name); break;
        case 3: for (int j = 0; j < 64; j++) table_{f}[j] += total >> (j & 7); break;
        case 4: if (it->next) total += it->next->key; break;
        default: total = total * 31 + i;
        }}
        if (total > {limit}) total /= 3;
    }}
    for (int j = 0; j < 64; j++) total += table_{f}[j] * (j + {stride});
    return total;
}}
"""

functions = int(sys.argv[1])
out = sys.stdout
out.write("#include <stddef.h>\n#include <string.h>\n\n")
out.write("struct item { long key; double weight; char name[24]; struct item *next; };\n")
for f in range(functions):
    out.write(FUNCTION.format(f=f, mix=f * 2654435761 % 1000003, factor=f % 13 + 3,
                              weight=f % 5 + 1, limit=f * 1000 + 77, stride=f % 11))
out.write("\nlong run_all(struct item *items, size_t count)\n{\n    long total = 0;\n")
for f in range(functions):
    out.write(f"    total += transform_{f}(items, count, total);\n")
out.write("    return total;\n}\n")
