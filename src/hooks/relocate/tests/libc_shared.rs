//! The allocator entries of this machine's libc.so.6, which this test process links too:
//! relocated into a page mapped within rel32 reach of libc, and called there in place of the
//! functions themselves.

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::path::Path;

use object::{Object, ObjectSymbol};

use super::check_relocated;
use crate::hooks::relocate::{relocate_entry, Refusal, MAX_RELOCATED_BYTES};
use crate::proc::maps::{find_gap, parse_maps};
use crate::trace::format::AllocFunction;

const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
/// Bytes of the code page given to each function's relocated prologue.
const SLOT_BYTES: usize = 128;
const PAGE_BYTES: usize = 4096;
/// How far from libc the code page may lie: well inside rel32 reach.
const PAGE_REACH: u64 = 1 << 30;
/// How far below libc the code page lies when it must be out of rel32 reach: 16 GiB.
const FAR_DISTANCE: u64 = 1 << 34;
const MALLOC_FAMILY: [&str; 5] = ["malloc", "calloc", "realloc", "reallocarray", "free"];

/// (address, size) of each function in libc's .dynsym, by name.
fn dynamic_symbols(path: &str) -> HashMap<String, (u64, usize)> {
    let data = std::fs::read(path).expect("readable libc");
    let file = object::File::parse(&*data).expect("parsable libc");
    file.dynamic_symbols()
        .filter(|symbol| symbol.is_definition())
        .filter_map(|symbol| {
            let name = symbol.name().ok()?.to_string();
            Some((name, (symbol.address(), symbol.size() as usize)))
        })
        .collect()
}

/// The running libc's own definition of `name` and its module's load address.
fn libc_function(name: &str) -> (u64, u64) {
    let name = CString::new(name).unwrap();
    // SAFETY: libc.so.6 is loaded (this process links it); RTLD_NOLOAD only looks it up.
    unsafe {
        let handle = libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        assert!(!handle.is_null(), "libc.so.6 is loaded");
        let address = libc::dlsym(handle, name.as_ptr());
        assert!(!address.is_null(), "{name:?} in libc.so.6");
        let mut info: libc::Dl_info = std::mem::zeroed();
        assert_ne!(libc::dladdr(address, &mut info), 0);
        libc::dlclose(handle);
        (address as u64, info.dli_fbase as u64)
    }
}

/// A read-write-execute page mapped within `PAGE_REACH` of `anchor`, unmapped on drop.
struct CodePage {
    base: *mut u8,
}

impl CodePage {
    fn near(anchor: u64, reach: u64) -> CodePage {
        for _ in 0..8 {
            let maps = parse_maps(&std::fs::read_to_string("/proc/self/maps").unwrap());
            let gap = find_gap(&maps, anchor, PAGE_BYTES as u64, reach).expect("a gap");
            // SAFETY: a fresh anonymous mapping at a free address; NOREPLACE refuses to
            // replace one another thread made since /proc/self/maps was read.
            let base = unsafe {
                libc::mmap(
                    gap as *mut c_void,
                    PAGE_BYTES,
                    libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                    -1,
                    0,
                )
            };
            if base != libc::MAP_FAILED {
                assert_eq!(base as u64, gap);
                return CodePage { base: base.cast() };
            }
        }
        panic!("no code page near {anchor:#x}");
    }

    fn address(&self, offset: usize) -> u64 {
        self.base as u64 + offset as u64
    }

    fn write(&self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= PAGE_BYTES);
        // SAFETY: in bounds of the writable mapping owned by self.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(offset), bytes.len())
        };
    }
}

impl Drop for CodePage {
    fn drop(&mut self) {
        // SAFETY: unmapping the page mapped in near; nothing runs there any more.
        unsafe { libc::munmap(self.base.cast(), PAGE_BYTES) };
    }
}

/// libc's own bytes of allocator function `name`: its address and the whole symbol.
fn libc_bytes(symbols: &HashMap<String, (u64, usize)>, name: &str) -> (u64, &'static [u8]) {
    let (address, base) = libc_function(name);
    let (value, size) = symbols[name];
    assert_eq!(address - base, value, "{name}: the running libc is {LIBC}");
    // SAFETY: the function's own code, mapped readable as long as libc is loaded.
    (address, unsafe {
        std::slice::from_raw_parts(address as *const u8, size)
    })
}

#[test]
fn libc_allocator_entries_run_relocated() {
    if !Path::new(LIBC).exists() {
        eprintln!("skipped: no {LIBC}");
        return;
    }
    const { assert!(SLOT_BYTES >= MAX_RELOCATED_BYTES) };
    let symbols = dynamic_symbols(LIBC);
    let page = CodePage::near(libc_function("malloc").0, PAGE_REACH);
    let mut relocated = HashMap::new();
    for (index, function) in AllocFunction::ALL.into_iter().enumerate() {
        let name = function.name();
        let (address, bytes) = libc_bytes(&symbols, name);
        let at = page.address(index * SLOT_BYTES);
        let relocation = relocate_entry(bytes, address, at)
            .unwrap_or_else(|refusal| panic!("{name}: {refusal}"));
        let rewritten = check_relocated(bytes, address, at, &relocation);
        eprintln!(
            "{name}: offset {} length {} original {:02x?} rewritten {rewritten:?} code {:02x?}",
            relocation.patch.offset,
            relocation.patch.length,
            relocation.patch.original,
            relocation.code
        );
        page.write(index * SLOT_BYTES, &relocation.code);
        relocated.insert(name, at as usize);
    }
    // SAFETY: each slot holds the function's relocated prologue followed by a jump into the
    // function itself, so it is the function, with its C signature.
    unsafe {
        run_malloc_family(&relocated);
        run_aligned_family(&relocated);
    }
}

/// Far from libc, the jump back and the jcc become absolute jumps; prologues with a
/// rip-relative operand are refused. malloc's and free's (glibc 2.34 and later) have none.
#[test]
fn libc_allocator_entries_run_relocated_out_of_rel32_reach() {
    if !Path::new(LIBC).exists() {
        eprintln!("skipped: no {LIBC}");
        return;
    }
    let symbols = dynamic_symbols(LIBC);
    let malloc = libc_function("malloc").0;
    let page = CodePage::near(malloc - FAR_DISTANCE, PAGE_REACH);
    assert!(malloc - page.address(0) > FAR_DISTANCE - PAGE_REACH);
    let mut relocated = HashMap::new();
    for (index, name) in MALLOC_FAMILY.into_iter().enumerate() {
        let (address, bytes) = libc_bytes(&symbols, name);
        let at = page.address(index * SLOT_BYTES);
        match relocate_entry(bytes, address, at) {
            Ok(relocation) => {
                eprintln!("{name} far: code {:02x?}", relocation.code);
                page.write(index * SLOT_BYTES, &relocation.code);
                relocated.insert(name, at as usize);
            }
            Err(refusal) => {
                assert!(
                    matches!(refusal, Refusal::Encoder { .. }),
                    "{name}: {refusal}"
                );
                assert!(name != "malloc" && name != "free", "{name}: {refusal}");
            }
        }
    }
    if relocated.len() == MALLOC_FAMILY.len() {
        // SAFETY: as in the test above; the slots lie far from libc.
        unsafe { run_malloc_family(&relocated) };
    } else {
        // SAFETY: as above; only malloc and free are called.
        unsafe { run_malloc_and_free(&relocated) };
    }
}

type Malloc = extern "C" fn(usize) -> *mut c_void;
type Calloc = extern "C" fn(usize, usize) -> *mut c_void;
type Realloc = extern "C" fn(*mut c_void, usize) -> *mut c_void;
type Reallocarray = extern "C" fn(*mut c_void, usize, usize) -> *mut c_void;
type Free = extern "C" fn(*mut c_void);
type PosixMemalign = extern "C" fn(*mut *mut c_void, usize, usize) -> i32;

fn function<T: Copy>(relocated: &HashMap<&str, usize>, name: &str) -> T {
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<usize>());
    // SAFETY: T is a function pointer type (size checked); the caller names its signature.
    unsafe { std::mem::transmute_copy(&relocated[name]) }
}

/// Calls relocated malloc and free.
unsafe fn run_malloc_and_free(relocated: &HashMap<&str, usize>) {
    let malloc: Malloc = function(relocated, "malloc");
    let free: Free = function(relocated, "free");
    let block = malloc(100).cast::<u8>();
    assert!(!block.is_null());
    for index in 0..100 {
        block.add(index).write(index as u8);
    }
    assert!((0..100).all(|index| block.add(index).read() == index as u8));
    free(block.cast());
    free(std::ptr::null_mut());
}

/// Calls relocated malloc, calloc, realloc, reallocarray and free, and checks what they did.
unsafe fn run_malloc_family(relocated: &HashMap<&str, usize>) {
    run_malloc_and_free(relocated);
    let malloc: Malloc = function(relocated, "malloc");
    let calloc: Calloc = function(relocated, "calloc");
    let realloc: Realloc = function(relocated, "realloc");
    let reallocarray: Reallocarray = function(relocated, "reallocarray");
    let free: Free = function(relocated, "free");

    // A block filled with ones and freed, then a calloc of its size: zeroed all the same.
    let dirty = malloc(200).cast::<u8>();
    dirty.write_bytes(0xff, 200);
    free(dirty.cast());
    let zeroed = calloc(25, 8).cast::<u8>();
    assert!(!zeroed.is_null());
    assert!((0..200).all(|index| zeroed.add(index).read() == 0));
    free(zeroed.cast());

    let grown = realloc(malloc(16), 4096).cast::<u8>();
    grown.write_bytes(0x5a, 16);
    let grown = realloc(grown.cast(), 1 << 20).cast::<u8>();
    assert!((0..16).all(|index| grown.add(index).read() == 0x5a));
    let grown = reallocarray(grown.cast(), 3, 1000).cast::<u8>();
    assert!((0..16).all(|index| grown.add(index).read() == 0x5a));
    assert!(
        reallocarray(grown.cast(), usize::MAX, 2).is_null(),
        "overflow"
    );
    free(grown.cast());
}

/// Calls the relocated aligned allocators and checks their alignment.
unsafe fn run_aligned_family(relocated: &HashMap<&str, usize>) {
    let free: Free = function(relocated, "free");
    let posix_memalign: PosixMemalign = function(relocated, "posix_memalign");
    let aligned_alloc: Calloc = function(relocated, "aligned_alloc");
    let memalign: Calloc = function(relocated, "memalign");
    let valloc: Malloc = function(relocated, "valloc");
    let pvalloc: Malloc = function(relocated, "pvalloc");

    let mut out: *mut c_void = std::ptr::null_mut();
    assert_eq!(posix_memalign(&mut out, 256, 100), 0);
    assert_eq!(out as usize % 256, 0);
    free(out);
    assert_eq!(posix_memalign(&mut out, 3, 8), libc::EINVAL);

    let aligned = [
        (aligned_alloc(512, 1024), 512),
        (memalign(4096, 100), 4096),
        (valloc(100), 4096),
        (pvalloc(100), 4096),
    ];
    for (pointer, alignment) in aligned {
        assert!(!pointer.is_null());
        assert_eq!(pointer as usize % alignment, 0);
    }
    // pvalloc rounds the size up to whole pages.
    assert!(libc::malloc_usable_size(aligned[3].0) >= 4096);
    for (pointer, _) in aligned {
        free(pointer);
    }
}
