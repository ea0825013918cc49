//! Writes the profiles of a synthetic MPI job, one per rank, as
//! `mpirun -n N memsup run -o 'DIR/%r.msup' -- ./app` would (`trace::synthetic_rank`): for
//! bench/job_merge.sh, which measures `memsup report DIR` over 1,024 of them.
//!
//! Usage: `cargo run --release --example rank_profiles -- RANKS EVENTS DIR`

use std::path::PathBuf;

use memsup::trace::synthetic_rank::write_rank_profile;

fn main() {
    let arguments: Vec<String> = std::env::args().collect();
    let [_, ranks, events, directory] = arguments.as_slice() else {
        eprintln!("usage: rank_profiles RANKS EVENTS DIR");
        std::process::exit(2);
    };
    let ranks: u32 = ranks.parse().expect("RANKS is a number");
    let events: u64 = events
        .parse()
        .expect("EVENTS is a number of heap events per rank");
    let directory = PathBuf::from(directory);
    std::fs::create_dir_all(&directory).expect("creating DIR");
    for rank in 0..ranks {
        let path = directory.join(format!("{rank}.msup"));
        let _ = std::fs::remove_file(&path);
        write_rank_profile(&path, rank, ranks, events).expect("writing a rank's profile");
    }
}
