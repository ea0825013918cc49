//! The tables of a pprof profile being built: strings, functions, mappings and locations,
//! each entered once and referred to by index or id, as profile.proto wants.

use std::collections::HashMap;

use super::profile_proto::{Function, Line, Location, Mapping};
use crate::analysis::{Frame, ModuleSpan};

/// A location's identity: its mapping, address and (function id, line) chain. The same
/// address gives different chains in two images of different programs, or when a skip
/// rule dropped some of its inlined frames.
type LocationKey = (u64, u64, Vec<(u64, i64)>);

#[derive(Default)]
pub(super) struct Tables {
    pub strings: Vec<String>,
    string_index: HashMap<String, i64>,
    pub functions: Vec<Function>,
    function_index: HashMap<(String, String), u64>,
    pub mappings: Vec<Mapping>,
    mapping_index: HashMap<(String, u64, u64), u64>,
    pub locations: Vec<Location>,
    location_index: HashMap<LocationKey, u64>,
}

impl Tables {
    pub fn new() -> Self {
        let mut tables = Tables::default();
        tables.string("");
        tables
    }

    /// The index of `text` in the string table.
    pub fn string(&mut self, text: &str) -> i64 {
        if let Some(&index) = self.string_index.get(text) {
            return index;
        }
        let index = self.strings.len() as i64;
        self.strings.push(text.to_string());
        self.string_index.insert(text.to_string(), index);
        index
    }

    /// The id of the mapping of module `span`.
    pub fn mapping(&mut self, span: &ModuleSpan) -> u64 {
        let key = (span.path.clone(), span.start, span.end);
        if let Some(&id) = self.mapping_index.get(&key) {
            return id;
        }
        let id = self.mappings.len() as u64 + 1;
        let filename = self.string(&span.path);
        self.mappings.push(Mapping {
            id,
            memory_start: span.start,
            memory_limit: span.end,
            filename,
            // Every location carries its names: pprof must not symbolise them again.
            has_functions: true,
            ..Mapping::default()
        });
        self.mapping_index.insert(key, id);
        id
    }

    /// The id of the location of `frames`: one return address and the functions inlined at
    /// it, innermost first, in the mapping `mapping_id` (0: none).
    pub fn location(&mut self, mapping_id: u64, frames: &[Frame]) -> u64 {
        let lines: Vec<(u64, i64)> = frames
            .iter()
            .map(|frame| {
                let line = frame.line.map_or(0, i64::from);
                (self.function(&frame.name(), frame.file.as_deref()), line)
            })
            .collect();
        let address = frames.first().map_or(0, |frame| frame.address);
        let key = (mapping_id, address, lines);
        if let Some(&id) = self.location_index.get(&key) {
            return id;
        }
        let id = self.locations.len() as u64 + 1;
        self.locations.push(Location {
            id,
            mapping_id,
            address,
            line: key
                .2
                .iter()
                .map(|&(function_id, line)| Line { function_id, line })
                .collect(),
        });
        if let Some(mapping) = self.mappings.get_mut(mapping_id.wrapping_sub(1) as usize) {
            let with_lines = frames.iter().any(|frame| frame.line.is_some());
            mapping.has_filenames |= frames.iter().any(|frame| frame.file.is_some());
            mapping.has_line_numbers |= with_lines;
            mapping.has_inline_frames |= frames.len() > 1;
        }
        self.location_index.insert(key, id);
        id
    }

    /// The id of function `name` of source file `file`.
    fn function(&mut self, name: &str, file: Option<&str>) -> u64 {
        let file = file.unwrap_or_default();
        let key = (name.to_string(), file.to_string());
        if let Some(&id) = self.function_index.get(&key) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        let name = self.string(name);
        let filename = self.string(file);
        self.functions.push(Function {
            id,
            name,
            system_name: name,
            filename,
            start_line: 0,
        });
        self.function_index.insert(key, id);
        id
    }
}
