//! User rules (`--component NAME=REGEX`): they name a component before any built-in rule,
//! matched against module paths and function names.

use regex::Regex;

/// One `NAME=REGEX` rule.
#[derive(Debug, Clone)]
pub struct ComponentRule {
    pub name: String,
    pub pattern: Regex,
}

impl ComponentRule {
    /// Parses `NAME=REGEX`; the error is one line saying what is wrong.
    pub fn parse(text: &str) -> Result<ComponentRule, String> {
        let Some((name, pattern)) = text.split_once('=') else {
            return Err(format!(
                "--component {text:?}: expected NAME=REGEX (no '=' found)"
            ));
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(format!("--component {text:?}: the component name is empty"));
        }
        // The regex crate's messages span several lines; its last line says what is wrong.
        let pattern = Regex::new(pattern).map_err(|error| {
            let message = error.to_string();
            let last = message.lines().last().unwrap_or_default().trim();
            let reason = last.strip_prefix("error: ").unwrap_or(last);
            format!("--component {text:?}: bad regular expression: {reason}")
        })?;
        Ok(ComponentRule {
            name: name.to_string(),
            pattern,
        })
    }
}

/// The user rules in the order given: the first matching one wins.
#[derive(Debug, Clone, Default)]
pub struct ComponentRules(pub Vec<ComponentRule>);

impl ComponentRules {
    /// Parses every `NAME=REGEX`, stopping at the first malformed one.
    pub fn parse_all(texts: &[String]) -> Result<ComponentRules, String> {
        let rules = texts
            .iter()
            .map(|text| ComponentRule::parse(text))
            .collect::<Result<_, _>>()?;
        Ok(ComponentRules(rules))
    }

    /// The name of the first rule matching any of `texts`.
    pub(super) fn first_match<'a>(
        &self,
        texts: impl Clone + Iterator<Item = &'a str>,
    ) -> Option<&str> {
        self.0.iter().find_map(|rule| {
            texts
                .clone()
                .any(|text| rule.pattern.is_match(text))
                .then_some(rule.name.as_str())
        })
    }
}
