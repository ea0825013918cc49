# Sourced by bench/kill_campaign.sh and bench/detach_campaign.sh: fixtures/hook_chaos.c as a
# target that runs until its stdin (a FIFO held open on fd 3) is closed.
#
# build_target WORK REPO   compiles the fixture and its library into WORK
# start_target DIR         starts one in DIR (stdout, stderr, and "exit N" appended to
#                          stdout when it ends); sets target_shell (the subshell to wait for)
#                          and pid (the program's), once it printed "ready"
# expected                 what a run that survived prints after its pid line

expected=$'hook_chaos: ready\nhook_chaos: 5 threads, every check passed\nexit 0'

build_target() {
    gcc -O2 -g -pthread -Wall -I"$2/fixtures" -o "$1/hook_chaos" "$2/fixtures/hook_chaos.c" -ldl
    gcc -O2 -g -Wall -shared -fPIC -o "$1/dlopen_arena.so" "$2/fixtures/dlopen_arena.c"
    target_work=$1
}

start_target() {
    local dir=$1
    mkdir -p "$dir"
    mkfifo "$dir/stdin"
    (
        "$target_work/hook_chaos" "$target_work/dlopen_arena.so" <"$dir/stdin" >"$dir/stdout" 2>"$dir/stderr"
        echo "exit $?" >>"$dir/stdout"
    ) &
    target_shell=$!
    exec 3>"$dir/stdin"
    for _ in $(seq 1 2000); do
        grep -q ready "$dir/stdout" 2>/dev/null && break
        sleep 0.005
    done
    pid=$(awk 'NR == 1 { print $3 }' "$dir/stdout")
}

# Milliseconds as a sleep(1) argument.
seconds() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }
