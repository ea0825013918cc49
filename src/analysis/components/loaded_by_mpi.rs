//! Which modules of an image the MPI library brought in: its DT_NEEDED libraries
//! (transitively) and the plugins it dlopened with theirs, so that they count as `mpi`
//! rather than as a row each. A library the executable itself needs stays its own.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fs::File;
use std::sync::{Arc, Mutex, OnceLock};

use object::elf::{FileHeader64, DT_NEEDED, DT_SONAME, SHT_SYMTAB};
use object::read::elf::{Dyn, FileHeader, SectionHeader, Sym};
use object::{Endianness, ReadCache};

use crate::platform::libraries::file_name;

/// What the dynamic section of a module says about its name and its dependencies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Dynamic {
    pub soname: Option<String>,
    pub needed: Vec<String>,
}

/// One module of the image as the rule sees it.
pub(super) struct ModuleFacts<'a> {
    pub path: &'a str,
    /// The module is MPI by itself: an MPI library by name, a plugin in an MPI directory,
    /// or mapped by a call whose stack passes through MPI code (dlopen from MPI).
    pub root: bool,
    /// The C runtime (libc, the dynamic linker, libm...): never taken into `mpi`.
    pub runtime: bool,
}

/// The modules that MPI brought in: reachable over DT_NEEDED from a root, not the C
/// runtime, and not reachable from the executable (`exe`) without passing through a root.
pub(super) fn mpi_modules(
    modules: &[ModuleFacts],
    exe: &str,
    dynamic: impl Fn(&str) -> Option<Arc<Dynamic>>,
) -> BTreeSet<String> {
    let dynamics: Vec<Option<Arc<Dynamic>>> = modules.iter().map(|m| dynamic(m.path)).collect();
    let graph = Graph::new(modules, &dynamics);
    let exe_index = modules.iter().position(|module| module.path == exe);
    // The executable's own closure, not entering MPI: what the program itself needs.
    let by_application = graph.reach(exe_index.into_iter(), |index| !modules[index].root);
    let roots = (0..modules.len()).filter(|&index| modules[index].root);
    let by_mpi = graph.reach(roots, |index| {
        !modules[index].runtime && !by_application.contains(&index)
    });
    by_mpi
        .into_iter()
        .filter(|&index| !modules[index].runtime && !by_application.contains(&index))
        .map(|index| modules[index].path.to_string())
        .collect()
}

/// DT_NEEDED edges between the image's modules.
struct Graph {
    edges: Vec<Vec<usize>>,
}

impl Graph {
    fn new(modules: &[ModuleFacts], dynamics: &[Option<Arc<Dynamic>>]) -> Graph {
        let mut by_soname: HashMap<&str, usize> = HashMap::new();
        for (index, dynamic) in dynamics.iter().enumerate() {
            if let Some(soname) = dynamic.as_ref().and_then(|d| d.soname.as_deref()) {
                by_soname.entry(soname).or_insert(index);
            }
        }
        let resolve = |needed: &str| {
            by_soname.get(needed).copied().or_else(|| {
                // Without a soname: the file is the name or a longer version of it.
                let longer = format!("{needed}.");
                modules.iter().position(|module| {
                    let file = file_name(module.path);
                    file == needed || file.starts_with(&longer)
                })
            })
        };
        let edges = dynamics
            .iter()
            .map(|dynamic| {
                dynamic.as_ref().map_or_else(Vec::new, |dynamic| {
                    dynamic.needed.iter().filter_map(|n| resolve(n)).collect()
                })
            })
            .collect();
        Graph { edges }
    }

    /// Every module reachable from `starts` (included), entering only those `enter` allows
    /// (the starts are always entered).
    fn reach(
        &self,
        starts: impl Iterator<Item = usize>,
        enter: impl Fn(usize) -> bool,
    ) -> BTreeSet<usize> {
        let mut seen: BTreeSet<usize> = BTreeSet::new();
        let mut queue: VecDeque<usize> = VecDeque::new();
        for start in starts {
            if seen.insert(start) {
                queue.push_back(start);
            }
        }
        while let Some(index) = queue.pop_front() {
            for &next in &self.edges[index] {
                if enter(next) && seen.insert(next) {
                    queue.push_back(next);
                }
            }
        }
        seen
    }
}

/// Directories whose shared objects are plugins of an MPI stack: Open MPI's components
/// (`openmpi/lib/openmpi3/mca_*.so`), PMIx's (`pmix2/lib/pmix/pmix_mca_*.so`), hwloc's
/// (`hwloc/hwloc_*.so`), UCX's (`ucx/libuct_*.so`) and libfabric's providers.
const MPI_PLUGIN_DIRECTORIES: &[&str] = &[
    "openmpi",
    "openmpi3",
    "pmix",
    "pmix2",
    "hwloc",
    "ucx",
    "libfabric",
    "mpich",
];

/// A module file name only an MPI stack ships: Open MPI's and PMIx's components and
/// Open MPI's common libraries.
const MPI_PLUGIN_PREFIXES: &[&str] = &["mca_", "pmix_mca_", "libmca_"];

/// True for a plugin of an MPI stack, known by its directory or its name.
pub(super) fn is_mpi_plugin(path: &str) -> bool {
    let file = file_name(path);
    if MPI_PLUGIN_PREFIXES
        .iter()
        .any(|prefix| file.starts_with(prefix))
    {
        return true;
    }
    let Some(directory) = path.rsplit_once('/').map(|(directory, _)| directory) else {
        return false;
    };
    directory
        .split('/')
        .any(|part| MPI_PLUGIN_DIRECTORIES.contains(&part))
}

/// The dynamic section of the file at `path`, read once per path for the whole process
/// (the files are the node's own libraries; one missing or unreadable gives None, and its
/// module keeps its own row unless its name says MPI).
pub(super) fn read_dynamic(path: &str) -> Option<Arc<Dynamic>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<Arc<Dynamic>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(known) = cache.lock().ok()?.get(path) {
        return known.clone();
    }
    let dynamic = parse_dynamic(path).map(Arc::new);
    cache.lock().ok()?.insert(path.to_string(), dynamic.clone());
    dynamic
}

/// The executable at `path` defines `MPI_Init`: a statically linked MPI program (read once
/// per path; only its symbol table is read).
pub(super) fn defines_mpi_init(path: &str) -> bool {
    static CACHE: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(&known) = cache.lock().ok().as_ref().and_then(|map| map.get(path)) {
        return known;
    }
    let defines = symbol_table_has(path, b"MPI_Init").unwrap_or(false);
    if let Ok(mut map) = cache.lock() {
        map.insert(path.to_string(), defines);
    }
    defines
}

fn symbol_table_has(path: &str, name: &[u8]) -> Option<bool> {
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    let cache = ReadCache::new(File::open(path).ok()?);
    let data = &cache;
    let header = FileHeader64::<Endianness>::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.sections(endian, data).ok()?;
    let symbols = sections.symbols(endian, data, SHT_SYMTAB).ok()?;
    let strings = symbols.strings();
    Some(
        symbols
            .iter()
            .any(|symbol| symbol.st_shndx(endian) != 0 && symbol.name(endian, strings) == Ok(name)),
    )
}

/// Reads only the headers, the dynamic section and its strings (libmpich is 40 MB).
fn parse_dynamic(path: &str) -> Option<Dynamic> {
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    let cache = ReadCache::new(File::open(path).ok()?);
    let data = &cache;
    let header = FileHeader64::<Endianness>::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.sections(endian, data).ok()?;
    let mut dynamic = Dynamic::default();
    for section in sections.iter() {
        let Some((entries, link)) = section.dynamic(endian, data).ok()? else {
            continue;
        };
        let strings = sections.strings(endian, data, link).ok()?;
        for entry in entries {
            let tag = entry.tag32(endian);
            if tag != Some(DT_NEEDED) && tag != Some(DT_SONAME) {
                continue;
            }
            let offset = entry.d_val(endian);
            let Ok(text) = strings.get(offset as u32) else {
                continue;
            };
            let text = String::from_utf8_lossy(text).into_owned();
            if tag == Some(DT_NEEDED) {
                dynamic.needed.push(text);
            } else {
                dynamic.soname = Some(text);
            }
        }
    }
    Some(dynamic)
}
