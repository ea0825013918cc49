//! The function symbols of one ELF file: lookup by name, and address → function + offset.

use std::collections::HashSet;

use super::elf::FunctionSymbol;

/// A function symbol as read from a symbol table, with the end of its section (so that a
/// size-0 symbol covers at most the rest of its section).
#[derive(Debug, Clone)]
pub struct RawFunction {
    pub symbol: FunctionSymbol,
    /// End address of the section the symbol is defined in (0 if absolute).
    pub section_end: u64,
}

/// One distinct address in the sorted table.
#[derive(Debug, Clone)]
struct AddressEntry {
    address: u64,
    /// The largest size among the aliases at this address.
    size: u64,
    section_end: u64,
    /// Index into `FunctionTable::symbols` of the name reported for this address.
    preferred: usize,
}

/// Function symbols in table order, plus an address-sorted index built once.
#[derive(Debug, Default)]
pub struct FunctionTable {
    symbols: Vec<FunctionSymbol>,
    by_address: Vec<AddressEntry>,
}

impl FunctionTable {
    /// Builds the table; identical (name, address) pairs (the same symbol in .symtab and
    /// .dynsym) are kept once, in first-seen order.
    pub fn new(functions: Vec<RawFunction>) -> FunctionTable {
        let mut seen = HashSet::with_capacity(functions.len());
        let first: Vec<bool> = functions
            .iter()
            .map(|function| seen.insert((function.symbol.name.as_str(), function.symbol.address)))
            .collect();
        drop(seen);
        let mut symbols = Vec::with_capacity(functions.len());
        let mut section_ends = Vec::with_capacity(functions.len());
        for (function, first) in functions.into_iter().zip(first) {
            if first {
                symbols.push(function.symbol);
                section_ends.push(function.section_end);
            }
        }
        let by_address = sort_by_address(&symbols, &section_ends);
        FunctionTable {
            symbols,
            by_address,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// Symbols named like one of `names`, grouped in the order of `names`.
    pub fn find(&self, names: &[&str]) -> Vec<FunctionSymbol> {
        // A few names against every symbol of a large program: comparing (lengths first)
        // costs less than hashing each symbol's name.
        let mut found: Vec<(usize, &FunctionSymbol)> = self
            .symbols
            .iter()
            .filter_map(|symbol| {
                Some((names.iter().position(|name| *name == symbol.name)?, symbol))
            })
            .collect();
        // Stable: within one name, table order (.symtab before .dynsym) is kept.
        found.sort_by_key(|&(position, _)| position);
        found
            .into_iter()
            .map(|(_, symbol)| symbol.clone())
            .collect()
    }

    /// Symbols whose name `accept`s, in table order.
    pub fn find_matching(&self, accept: impl Fn(&str) -> bool) -> Vec<FunctionSymbol> {
        self.symbols
            .iter()
            .filter(|symbol| accept(&symbol.name))
            .cloned()
            .collect()
    }

    /// The size of the function that starts at `address`, when its symbol gives one.
    pub fn size_of_function_at(&self, address: u64) -> Option<u64> {
        let index = self
            .by_address
            .partition_point(|entry| entry.address < address);
        let entry = self.by_address.get(index)?;
        (entry.address == address && entry.size > 0).then_some(entry.size)
    }

    /// The function containing `address` and the offset into it.
    pub fn symbolize(&self, address: u64) -> Option<(String, u64)> {
        let index = self
            .by_address
            .partition_point(|entry| entry.address <= address);
        let entry = self.by_address.get(index.checked_sub(1)?)?;
        let offset = address - entry.address;
        let inside = if entry.size > 0 {
            offset < entry.size
        } else {
            address < entry.section_end
        };
        inside.then(|| (self.symbols[entry.preferred].name.clone(), offset))
    }
}

/// One entry per distinct address, naming each by `preferred_alias`.
fn sort_by_address(symbols: &[FunctionSymbol], section_ends: &[u64]) -> Vec<AddressEntry> {
    let mut order: Vec<usize> = (0..symbols.len()).collect();
    // Stable, so aliases keep table order within an address.
    order.sort_by_key(|&index| symbols[index].address);
    let mut entries = Vec::new();
    for group in order.chunk_by(|&left, &right| symbols[left].address == symbols[right].address) {
        entries.push(AddressEntry {
            address: symbols[group[0]].address,
            size: group
                .iter()
                .map(|&index| symbols[index].size)
                .max()
                .unwrap_or(0),
            section_end: group
                .iter()
                .map(|&index| section_ends[index])
                .max()
                .unwrap_or(0),
            preferred: preferred_alias(symbols, group),
        });
    }
    entries
}

/// glibc defines public names as aliases of internal ones (`malloc` = `__libc_malloc`):
/// report the shortest name without a leading underscore, else the first one.
fn preferred_alias(symbols: &[FunctionSymbol], group: &[usize]) -> usize {
    group
        .iter()
        .copied()
        .filter(|&index| !symbols[index].name.starts_with('_'))
        .min_by_key(|&index| symbols[index].name.len())
        .unwrap_or(group[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(name: &str, address: u64, size: u64, section_end: u64) -> RawFunction {
        RawFunction {
            symbol: FunctionSymbol {
                name: name.to_string(),
                address,
                size,
                is_ifunc: false,
            },
            section_end,
        }
    }

    fn table() -> FunctionTable {
        FunctionTable::new(vec![
            function("__libc_malloc", 0x1000, 0x100, 0x9000),
            function("__malloc", 0x1000, 0x100, 0x9000),
            function("malloc", 0x1000, 0x100, 0x9000),
            function("__libc_free", 0x1200, 0x80, 0x9000),
            function("_start", 0x8000, 0, 0x9000),
            function("malloc", 0x1000, 0x100, 0x9000),
        ])
    }

    #[test]
    fn prefers_public_alias() {
        let table = table();
        assert_eq!(table.symbolize(0x1005), Some(("malloc".to_string(), 5)));
        assert_eq!(
            table.symbolize(0x1200),
            Some(("__libc_free".to_string(), 0))
        );
    }

    #[test]
    fn respects_sizes_and_section_ends() {
        let table = table();
        assert_eq!(table.symbolize(0x0fff), None);
        assert_eq!(table.symbolize(0x1100), None);
        assert_eq!(table.symbolize(0x1280), None);
        assert_eq!(table.symbolize(0x8fff), Some(("_start".to_string(), 0xfff)));
        assert_eq!(table.symbolize(0x9000), None);
    }

    #[test]
    fn finds_in_order_of_names_without_duplicates() {
        let found = table().find(&["__libc_free", "malloc", "missing"]);
        let names: Vec<&str> = found.iter().map(|symbol| symbol.name.as_str()).collect();
        assert_eq!(names, ["__libc_free", "malloc"]);
    }

    #[test]
    fn sizes_only_functions_starting_at_the_address() {
        let table = table();
        assert_eq!(table.size_of_function_at(0x1000), Some(0x100));
        assert_eq!(table.size_of_function_at(0x1200), Some(0x80));
        assert_eq!(table.size_of_function_at(0x1005), None);
        assert_eq!(table.size_of_function_at(0x0fff), None);
        // No size: the function's end is unknown.
        assert_eq!(table.size_of_function_at(0x8000), None);
        assert_eq!(table.size_of_function_at(0x9000), None);
    }
}
