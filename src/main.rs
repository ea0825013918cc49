fn main() {
    println!("memsup");
}
