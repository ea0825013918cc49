//! In-process hooks for tests: code assembled into an executable page of this process,
//! an area in an anonymous mapping, and `extern "C"` stand-ins for the allocator.

use std::arch::asm;
use std::sync::atomic::{AtomicU64, Ordering};

use super::code::{assemble, AssembledHooks, CpuSource};
use super::layout::{self, Hook, Op};
use super::ring::Area;

/// Pointers the fake allocator hands out: distinct, 16-byte aligned, never dereferenced.
pub const FAKE_HEAP: u64 = 0x5000_0000_0000;
static NEXT_BLOCK: AtomicU64 = AtomicU64::new(0);
pub static FREES: AtomicU64 = AtomicU64::new(0);
pub static FREED_SUM: AtomicU64 = AtomicU64::new(0);

pub fn fake_block() -> u64 {
    FAKE_HEAP + 16 * NEXT_BLOCK.fetch_add(1, Ordering::Relaxed)
}

pub extern "C" fn fake_malloc(_size: u64) -> u64 {
    fake_block()
}

pub extern "C" fn fake_free(pointer: u64) {
    FREES.fetch_add(1, Ordering::Relaxed);
    FREED_SUM.fetch_add(pointer, Ordering::Relaxed);
}

pub extern "C" fn fake_triple(value: u64) -> u64 {
    3 * value + 1
}

/// Mixes all six arguments, so a hook that loses one changes the result.
pub extern "C" fn fake_six(a: u64, b: u64, c: u64, d: u64, e: u64, f: u64) -> u64 {
    a ^ b.rotate_left(8) ^ c.rotate_left(16) ^ d.rotate_left(24) ^ e.rotate_left(32) ^ f << 1
}

/// An MPI function's stand-in: returns rsp at its entry and keeps its return address and
/// the twelve words above it (where a function finds its arguments passed on the stack) in
/// `FAKE_MPI_STACK`.
pub static FAKE_MPI_STACK: [AtomicU64; 13] = [const { AtomicU64::new(0) }; 13];
/// Held by a test while it calls the stand-in and reads what it saw.
pub static FAKE_MPI_USE: std::sync::Mutex<()> = std::sync::Mutex::new(());

std::arch::global_asm!(
    ".globl memsup_test_fake_mpi",
    "memsup_test_fake_mpi:",
    "lea r11, [rip + {stack}]",
    "xor eax, eax",
    "2:",
    "mov r10, [rsp + 8 * rax]",
    "mov [r11 + 8 * rax], r10",
    "inc eax",
    "cmp eax, 13",
    "jne 2b",
    "mov rax, rsp",
    "ret",
    stack = sym FAKE_MPI_STACK,
);

extern "C" {
    pub fn memsup_test_fake_mpi() -> u64;
}

/// Calls `entry` with twelve arguments on the stack (the seventh to eighteenth of a C
/// function); returns its rax.
pub fn call_with_stack_arguments(entry: u64, stack: [u64; 12]) -> u64 {
    let result: u64;
    // SAFETY: the callee follows the C ABI; rsp is 16-byte aligned in the block, and again
    // at the call after twelve words; the block takes them off again.
    unsafe {
        asm!(
            "sub rsp, 96",
            "mov rcx, 0",
            "2:",
            "mov rax, [rsi + 8 * rcx]",
            "mov [rsp + 8 * rcx], rax",
            "inc rcx",
            "cmp rcx, 12",
            "jne 2b",
            "call r11",
            "add rsp, 96",
            in("rsi") stack.as_ptr(),
            in("r11") entry,
            lateout("rax") result,
            clobber_abi("C"),
        );
    }
    result
}

/// posix_memalign: alignment 3 fails with EINVAL and stores nothing.
pub extern "C" fn fake_posix_memalign(out: *mut u64, alignment: u64, _size: u64) -> u32 {
    if alignment == 3 {
        return libc::EINVAL as u32;
    }
    // SAFETY: the tests pass a pointer to a live u64.
    unsafe { *out = fake_block() };
    0
}

/// Hooks in an executable page and the area they record into, both owned by the value.
pub struct Harness {
    code: *mut libc::c_void,
    code_len: usize,
    area_base: *mut libc::c_void,
    area_len: usize,
    pub area: Area,
    pub hooks: AssembledHooks,
    given: Vec<Hook>,
}

// SAFETY: the mappings live as long as the harness; the area is shared memory by design.
unsafe impl Send for Harness {}
unsafe impl Sync for Harness {}

pub struct AreaConfig {
    pub ring_count: u32,
    pub capacity: u64,
    pub policy: u32,
    pub stale_ticks: u64,
    pub wait_limit_ticks: u64,
}

impl AreaConfig {
    /// Waits for room without ever giving up within a test's life.
    pub fn waiting(ring_count: u32, capacity: u64) -> AreaConfig {
        AreaConfig {
            ring_count,
            capacity,
            policy: layout::POLICY_WAIT,
            stale_ticks: i64::MAX as u64,
            wait_limit_ticks: i64::MAX as u64,
        }
    }
}

fn map(len: usize, protection: i32) -> *mut libc::c_void {
    // SAFETY: a fresh anonymous mapping.
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            protection,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(address, libc::MAP_FAILED);
    address
}

impl Harness {
    /// Hooks `ops`, each continuing into the function at the same position in `targets`.
    pub fn new(cpu: CpuSource, config: AreaConfig, ops: &[Op], targets: &[u64]) -> Harness {
        let hooks: Vec<Hook> = ops.iter().map(|&op| op.into()).collect();
        Harness::with_hooks(cpu, config, &hooks, targets)
    }

    /// As `new`, for hooks that need more than their operation (MPI entry points).
    pub fn with_hooks(
        cpu: CpuSource,
        config: AreaConfig,
        given: &[Hook],
        targets: &[u64],
    ) -> Harness {
        let shape = layout::Shape::full(config.ring_count as u64, config.capacity);
        let area_len = shape.bytes() as usize;
        let area_base = map(area_len, libc::PROT_READ | libc::PROT_WRITE);
        // SAFETY: the mapping lives as long as the harness.
        let area = unsafe { Area::new(area_base.cast(), area_len) };
        area.initialise(
            &shape,
            config.policy,
            config.stale_ticks,
            config.wait_limit_ticks,
        );
        let code_len = 1 << 16;
        let rwx = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
        let code = map(code_len, rwx);
        let hooks = assemble(code as u64, area_base as u64, cpu, given).expect("assembles");
        assert!(hooks.bytes.len() <= code_len);
        // SAFETY: the code page is writable and large enough.
        unsafe {
            std::ptr::copy_nonoverlapping(hooks.bytes.as_ptr(), code.cast(), hooks.bytes.len());
            for (slot, target) in hooks.continuation_slots.iter().zip(targets) {
                *(*slot as *mut u64) = *target;
            }
        }
        Harness {
            code,
            code_len,
            area_base,
            area_len,
            area,
            hooks,
            given: given.to_vec(),
        }
    }

    /// Where the area is (in this process, the hooks' address of it too).
    pub fn area_address(&self) -> u64 {
        self.area_base as u64
    }

    pub fn entry(&self, op: Op) -> u64 {
        let position = self
            .given
            .iter()
            .position(|h| h.op == op)
            .expect("op hooked");
        self.hooks.entries[position]
    }

    pub fn malloc(&self) -> extern "C" fn(u64) -> u64 {
        // SAFETY: the hook has malloc's signature.
        unsafe { std::mem::transmute::<u64, extern "C" fn(u64) -> u64>(self.entry(Op::Malloc)) }
    }

    pub fn free(&self) -> extern "C" fn(u64) {
        // SAFETY: the hook has free's signature.
        unsafe { std::mem::transmute::<u64, extern "C" fn(u64)>(self.entry(Op::Free)) }
    }

    /// The ring's head: records claimed so far.
    pub fn head(&self, ring: u64) -> u64 {
        let offset = layout::ring_offset(ring, self.capacity()) + layout::ring::HEAD;
        // SAFETY: inside the area mapping.
        unsafe {
            (*(self.area_base.cast::<u8>().add(offset as usize) as *const AtomicU64))
                .load(Ordering::Acquire)
        }
    }

    fn capacity(&self) -> u64 {
        // SAFETY: inside the area mapping.
        unsafe {
            *(self
                .area_base
                .cast::<u8>()
                .add(layout::header::CAPACITY as usize) as *const u64)
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        // SAFETY: both mappings were made by `new` and nothing uses them any more.
        unsafe {
            libc::munmap(self.code, self.code_len);
            libc::munmap(self.area_base, self.area_len);
        }
    }
}

/// What a call through `call_observed` saw.
#[derive(Debug, Default, Clone, Copy)]
#[repr(C)]
pub struct Observed {
    /// rbx, rbp, r12, r13, r14, r15 after the call.
    pub callee_saved: [u64; 6],
    pub result: u64,
    /// The return address the call pushed.
    pub return_address: u64,
    /// rsp at the callee's entry (pointing at the return address).
    pub stack_pointer: u64,
}

/// The values `call_observed` puts in rbx, rbp, r12..r15 before the call.
pub const CALLEE_SAVED_MARKS: [u64; 6] = [
    0x1111_2222_3333_4444,
    0x5555_6666_7777_8888,
    0x9999_aaaa_bbbb_cccc,
    0xdddd_eeee_ffff_0101,
    0x0202_0303_0404_0505,
    0x0606_0707_0808_0909,
];

/// Calls `entry` with `arguments` in rdi..r9 and known values in every callee-saved
/// register, and reports them after the call.
pub fn call_observed(entry: u64, arguments: [u64; 6]) -> Observed {
    let mut seen = Observed::default();
    // SAFETY: the callee follows the C ABI; the block restores rbx and rbp itself and
    // declares every other register it changes.
    unsafe {
        asm!(
            "push rbx",
            "push rbp",
            "push {seen}",
            "sub rsp, 8",
            "mov rbx, 0x1111222233334444",
            "mov rbp, 0x5555666677778888",
            "mov r12, 0x9999aaaabbbbcccc",
            "mov r13, 0xddddeeeeffff0101",
            "mov r14, 0x0202030304040505",
            "mov r15, 0x0606070708080909",
            "call r11",
            "2:",
            "lea r11, [rip + 2b]",
            "lea r10, [rsp - 8]",
            "mov rcx, [rsp + 8]",
            "mov [rcx], rbx",
            "mov [rcx + 8], rbp",
            "mov [rcx + 16], r12",
            "mov [rcx + 24], r13",
            "mov [rcx + 32], r14",
            "mov [rcx + 40], r15",
            "mov [rcx + 48], rax",
            "mov [rcx + 56], r11",
            "mov [rcx + 64], r10",
            "add rsp, 16",
            "pop rbp",
            "pop rbx",
            seen = in(reg) &mut seen,
            in("r11") entry,
            in("rdi") arguments[0],
            in("rsi") arguments[1],
            in("rdx") arguments[2],
            in("rcx") arguments[3],
            in("r8") arguments[4],
            in("r9") arguments[5],
            out("r12") _,
            out("r13") _,
            out("r14") _,
            out("r15") _,
            clobber_abi("C"),
        );
    }
    seen
}

/// This thread's `fs:[0]`, as the hooks record it.
pub fn thread_pointer() -> u64 {
    let value: u64;
    // SAFETY: reads the thread's own TCB self pointer.
    unsafe { asm!("mov {}, fs:[0]", out(reg) value, options(nostack, readonly)) };
    value
}
