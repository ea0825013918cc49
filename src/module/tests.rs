//! One read per file, however many parts of a recording ask for it.

use std::time::{Duration, SystemTime};

use super::*;
use crate::symbols::Symbolizer;
use crate::unwind::Unwinder;

const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
const START: u64 = 0x7f00_0000_0000;

/// Probe planting, an unwinder per process image and the symboliser, as a recording uses
/// them: libc is read from disk once, and each part is parsed once.
#[test]
fn probes_unwinders_and_the_symboliser_share_one_read() {
    let store = Arc::new(ModuleStore::new());
    // The tracer: symbols to probe.
    let file = store.get(LIBC).unwrap();
    let malloc = file.elf().unwrap().find_functions(&["malloc"])[0].address;
    let (malloc_name, _) = file.elf().unwrap().symbolize(malloc).unwrap();
    // The collector: two images' unwinders, then the symboliser at the images' end.
    let end = START + (64 << 20);
    for _ in 0..2 {
        let mut unwinder = Unwinder::with_module_store(Arc::clone(&store));
        unwinder
            .add_module(LIBC, MappedInode::default(), START, end, START)
            .unwrap();
        assert!(unwinder.is_code(START + malloc));
    }
    let mut symbolizer = Symbolizer::with_store(Arc::clone(&store));
    // DWARF (where libc's debug file is installed) names it `__GI___libc_malloc`.
    let frames = symbolizer.symbolize(LIBC, malloc, false);
    assert!(frames.last().unwrap().raw_name.ends_with("malloc"));
    assert_eq!(
        symbolizer.elf(LIBC).unwrap().symbolize(malloc).unwrap().0,
        malloc_name
    );

    assert_eq!(store.reads(LIBC), 1);
    assert_eq!(store.read_counts(), [(LIBC.to_string(), 1)]);
    let again = store.get(LIBC).unwrap();
    assert!(Arc::ptr_eq(&file, &again));
    assert!(std::ptr::eq(file.elf().unwrap(), again.elf().unwrap()));
    assert!(std::ptr::eq(
        file.unwind().unwrap(),
        again.unwind().unwrap()
    ));
}

#[test]
fn callers_at_once_wait_for_one_read() {
    let store = ModuleStore::new();
    let files: Vec<Arc<ModuleFile>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| store.get(LIBC).unwrap()))
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(store.reads(LIBC), 1);
    assert!(files.iter().all(|file| Arc::ptr_eq(file, &files[0])));
}

/// A file rewritten (another size, or the same size and a new modification time) or
/// replaced (another inode) is read again; one missing is an error and not remembered.
#[test]
fn a_file_changed_on_disk_is_read_again() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("libchanging.so");
    let path_text = path.to_str().unwrap();
    let store = ModuleStore::new();
    assert!(store.get(path_text).is_err());
    assert_eq!(store.reads(path_text), 0);

    std::fs::write(&path, b"first").unwrap();
    assert_eq!(&**store.get(path_text).unwrap().bytes(), b"first");
    store.get(path_text).unwrap();
    assert_eq!(store.reads(path_text), 1);

    std::fs::write(&path, b"second").unwrap();
    assert_eq!(&**store.get(path_text).unwrap().bytes(), b"second");
    assert_eq!(store.reads(path_text), 2);

    std::fs::write(&path, b"third!").unwrap();
    let later = SystemTime::now() + Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(later)
        .unwrap();
    assert_eq!(&**store.get(path_text).unwrap().bytes(), b"third!");
    assert_eq!(store.reads(path_text), 3);

    let replacement = directory.path().join("replacement");
    std::fs::write(&replacement, b"fourth").unwrap();
    std::fs::rename(&replacement, &path).unwrap();
    assert_eq!(&**store.get(path_text).unwrap().bytes(), b"fourth");
    assert_eq!(store.reads(path_text), 4);

    // Not ELF: read, but nothing parses.
    let file = store.get(path_text).unwrap();
    assert!(file.elf().is_err() && file.unwind().is_err());
    assert_eq!(store.reads(path_text), 4);
}

/// The file a process maps, once found, is what later users get by its path and inode,
/// after the file at that path was replaced too; a mapping whose file was never at the
/// path gets the file there, unverified.
#[test]
fn a_process_s_file_is_kept_by_its_path_and_inode() {
    use std::os::unix::fs::MetadataExt;
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("libmapped.so");
    let path_text = path.to_str().unwrap();
    std::fs::write(&path, b"mapped").unwrap();
    let metadata = std::fs::metadata(&path).unwrap();
    let device = (libc::major(metadata.dev()), libc::minor(metadata.dev()));
    let mapped = MappedInode {
        device,
        inode: metadata.ino(),
    };
    let pid = std::process::id() as i32;
    let store = ModuleStore::new();
    let found = store.of_process(pid, path_text, mapped).unwrap();
    assert!(found.verified);
    assert_eq!(&**found.file.bytes(), b"mapped");
    assert!(Arc::ptr_eq(&found.file, &store.get(path_text).unwrap()));

    let replacement = directory.path().join("replacement");
    std::fs::write(&replacement, b"newer").unwrap();
    std::fs::rename(&replacement, &path).unwrap();
    let kept = store.get_mapped(path_text, mapped).unwrap();
    assert!(Arc::ptr_eq(&kept, &found.file));
    assert_eq!(&**store.get(path_text).unwrap().bytes(), b"newer");
    // The mapped file is gone from both roots: the one found before is still it.
    let again = store.of_process(pid, path_text, mapped).unwrap();
    assert!(again.verified && Arc::ptr_eq(&again.file, &found.file));
    // A mapping never verified: the regular file at the path in the process's root (here
    // memsup's, one copy), unverified.
    // Inode 0 is no file's.
    let never = MappedInode { device, inode: 0 };
    let other = store.of_process(pid, path_text, never).unwrap();
    assert!(!other.verified);
    assert!(Arc::ptr_eq(&other.file, &store.get(path_text).unwrap()));
    // Another inode at the path than any found: memsup's file there.
    let unknown = MappedInode { device, inode: 1 };
    assert_eq!(
        &**store.get_mapped(path_text, unknown).unwrap().bytes(),
        b"newer"
    );
    assert_eq!(store.reads(path_text), 2);
}
