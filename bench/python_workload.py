#!/usr/bin/env python3
"""bench/engines.sh's python3 workload: ROUNDS rounds of building dicts of lists, strings
and tuples, sorting, and deleting most of it again (the interpreter's allocator and malloc
both busy). Prints one deterministic "checksum=" line: no hash() of str, whose seed varies.
Usage: python_workload.py ROUNDS"""
import sys

MODULUS = 1_000_000_007


def one_round(seed, keep):
    table = {}
    for i in range(2000):
        key = f"k{(i * 7919 + seed) % 5003}-{i % 17}"
        table[key] = ([i, seed, i * seed % 97], f"value-{i}-{seed}" * (1 + i % 4), (i, key))
    ordered = sorted(table.items(), key=lambda item: (len(item[1][1]), item[0]))
    total = 0
    for position, (key, (numbers, text, pair)) in enumerate(ordered):
        total = (total * 31 + position * sum(numbers) + len(text) + len(key) + pair[0]) % MODULUS
    for key in [key for key, (numbers, _, _) in ordered if numbers[2] % 4]:
        del table[key]
    keep.append(table)  # a few rounds survive longer, so frees are not all in build order
    if len(keep) > 8:
        keep.pop(0)
    return total


def main():
    rounds = int(sys.argv[1])
    keep = []
    checksum = 0
    for seed in range(rounds):
        checksum = (checksum * 1_000_003 + one_round(seed, keep)) % MODULUS
    checksum = (checksum + sum(len(table) for table in keep)) % MODULUS
    print(f"checksum={checksum}")


if __name__ == "__main__":
    main()
