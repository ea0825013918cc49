//! What `memsup report` looks at and where it writes: the process images `--pid` and `--exe`
//! select, the overview of several images, the newest profile when none is named, and the
//! file a report goes to (`-o`, or a name after the profile for formats that are files).

pub mod destination;
pub mod html_selector;
pub mod newest;
pub mod overview;
pub mod select;
