//! The colours of the components on one page: the well-known names keep theirs
//! (`charts::colour`), the others take, in order of appearance, the next colour of a
//! qualitative palette that none of the well-known ones use, so that no two components of a
//! page share a colour (app, libgmp and libmpc came out in three blues when every name was
//! hashed to a hue). Beyond the palette, a hue from a hash of the name.

use std::collections::HashMap;

use super::charts::{colour, is_known};
use crate::analysis::ProcessAnalysis;

/// Tableau's 10 and 20 colours but those of the well-known components, most distinct first.
const QUALITATIVE: [&str; 14] = [
    "#b07aa1", "#ff9da7", "#8cd17d", "#b6992d", "#499894", "#d37295", "#a0cbe8", "#ffbe7d",
    "#79706e", "#f1ce63", "#86bcb6", "#d4a6c8", "#fabfd2", "#d7b5a6",
];

/// The colour of each component of a page.
#[derive(Debug, Default)]
pub struct Palette {
    colours: HashMap<String, String>,
}

impl Palette {
    /// The palette of `names` (repeats ignored), assigned in order.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut colours = HashMap::new();
        let mut next = 0;
        for name in names {
            if colours.contains_key(name) {
                continue;
            }
            let chosen = if is_known(name) || next >= QUALITATIVE.len() {
                colour(name)
            } else {
                next += 1;
                QUALITATIVE[next - 1].to_string()
            };
            colours.insert(name.to_string(), chosen);
        }
        Palette { colours }
    }

    /// The palette of the components of `images`, in their order.
    pub fn of_images(images: &[ProcessAnalysis]) -> Self {
        Palette::new(images.iter().flat_map(|image| {
            (image.components.components.iter()).map(|component| component.name.as_str())
        }))
    }

    /// The colour of `name`: its own on this page, else the one its name hashes to.
    pub fn colour(&self, name: &str) -> String {
        self.colours
            .get(name)
            .cloned()
            .unwrap_or_else(|| colour(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_two_components_of_a_page_share_a_colour() {
        let mut names: Vec<String> = ["app", "libgmp.so", "libmpc.so", "libc", "mpi"]
            .iter()
            .map(|name| name.to_string())
            .collect();
        names.extend((0..13).map(|index| format!("libextra{index}.so")));
        names.extend(["stacks", "shm", "memsup", "unknown", "overhead"].map(String::from));
        let palette = Palette::new(names.iter().map(String::as_str));
        let mut colours: Vec<String> = names.iter().map(|name| palette.colour(name)).collect();
        assert_eq!(
            palette.colour("app"),
            "#4e79a7",
            "a known name keeps its colour"
        );
        assert_eq!(palette.colour("libgmp.so"), "#b07aa1");
        assert_eq!(palette.colour("libmpc.so"), "#ff9da7");
        colours.sort();
        colours.dedup();
        assert_eq!(colours.len(), names.len(), "{colours:?}");
        // Past the palette: the hashed hue.
        let more = Palette::new(names.iter().map(String::as_str).chain(["libz.so"]));
        assert_eq!(more.colour("libz.so"), colour("libz.so"));
        assert_eq!(more.colour("not on the page"), colour("not on the page"));
    }
}
