//! Which users may create, read, write or close which containers of an address space: its
//! access rules, which the space enforces as the owner of its containers (see `guard`).
//!
//! A space's user is the one its credentials name (`anonymous` without credentials). Every
//! request to an owner travels on a key that ends with the sender's user, and a router or
//! listening peer with access rules has Zenoh refuse, on each authenticated link, requests
//! whose key names another user (`Config::to_zenoh`), so an owner reached through it knows
//! who asks.

use std::path::Path;

use stampede_core::Permission;
use zenoh::key_expr::{keyexpr, OwnedKeyExpr};

use crate::error::NetError;

/// The user of a space that presents no credentials.
pub const ANONYMOUS: &str = "anonymous";

/// An owner's access rules: which users may create, read, write or close which of its
/// containers, by name pattern. Without rules, an owner allows everything.
///
/// The text form has one rule per line, `user permissions pattern`, and `#` comments:
///
/// ```text
/// # user     permissions   containers
/// alice      read,write    video/**
/// *          read          public/*
/// operator   all           **
/// ```
///
/// A user is a name from the credentials, `anonymous`, or `*` for every user. Permissions
/// are `create`, `read` (attach inputs, follow arrivals and garbage), `write` (attach
/// outputs) and `close`, comma-separated, or `all`. A pattern is a key expression over
/// container names (`*` one chunk, `**` any chunks); an unnamed container matches `**`
/// only. A user may do what any rule naming it or `*` allows, and nothing else.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    rules: Vec<Rule>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    /// `None` for every user.
    user: Option<String>,
    allowed: Vec<Permission>,
    pattern: OwnedKeyExpr,
}

impl Access {
    /// Parses rules from their text form; a malformed line is a `Config` error naming it.
    pub fn parse(text: &str) -> Result<Access, NetError> {
        let mut rules = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad =
                |why: String| NetError::Config(format!("access rules, line {}: {why}", n + 1));
            let words: Vec<&str> = line.split_whitespace().collect();
            let [user, perms, pattern] = words[..] else {
                return Err(bad(format!(
                    "expected `user permissions pattern`, found {line:?}"
                )));
            };
            let user = match user {
                "*" => None,
                u => Some(valid_user(u).map_err(bad)?.to_owned()),
            };
            let allowed = if perms == "all" {
                Permission::ALL.to_vec()
            } else {
                perms
                    .split(',')
                    .map(|p| {
                        Permission::ALL
                            .into_iter()
                            .find(|q| q.name() == p)
                            .ok_or_else(|| {
                                bad(format!(
                                    "unknown permission {p:?} (create, read, write, close or all)"
                                ))
                            })
                    })
                    .collect::<Result<_, _>>()?
            };
            let pattern = OwnedKeyExpr::autocanonize(pattern.to_owned())
                .map_err(|e| bad(format!("pattern {pattern:?}: {e}")))?;
            rules.push(Rule {
                user,
                allowed,
                pattern,
            });
        }
        Ok(Access { rules })
    }

    /// Reads and parses a rules file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Access, NetError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| NetError::Config(format!("access rules {}: {e}", path.display())))?;
        Access::parse(&text)
    }

    /// Whether `user` may `op` the container named `name` (`None`: unnamed).
    pub fn allows(&self, user: &str, op: Permission, name: Option<&str>) -> bool {
        let name = name.and_then(|n| keyexpr::new(n).ok());
        self.rules.iter().any(|r| {
            r.user.as_deref().map_or(true, |u| u == user)
                && r.allowed.contains(&op)
                && match name {
                    Some(n) => r.pattern.includes(n),
                    None => r.pattern.as_str() == "**",
                }
        })
    }

    /// The users the rules name.
    pub(crate) fn users(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().filter_map(|r| r.user.as_deref())
    }
}

/// `user` if it can stand in a key: non-empty, without `/`, `*`, `$`, `?` or `#`.
pub(crate) fn valid_user(user: &str) -> Result<&str, String> {
    if user.is_empty() || user.contains(['/', '*', '$', '?', '#']) {
        return Err(format!(
            "user {user:?} cannot be used: a user is non-empty, without / * $ ? #"
        ));
    }
    Ok(user)
}

/// The key families on which requests reach an owner, each ending with the sender's user.
pub(crate) const TO_OWNER: [&str; 3] = ["op", "put", "note"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_grant_what_they_name_and_nothing_else() {
        let a = Access::parse(
            "# who  what   where\n\
             alice  read,write  video/**\n\
             *      read        public/*   # everyone\n\
             root   all         **\n",
        )
        .unwrap();
        use Permission::*;
        assert!(a.allows("alice", Write, Some("video/cam/0")));
        assert!(!a.allows("alice", Close, Some("video/cam/0")));
        assert!(!a.allows("alice", Read, Some("audio/mic")));
        assert!(a.allows("bob", Read, Some("public/news")));
        assert!(!a.allows("bob", Read, Some("public/news/old")));
        assert!(!a.allows("bob", Write, Some("public/news")));
        assert!(a.allows("anonymous", Read, Some("public/news")));
        assert!(a.allows("root", Create, Some("x")));
        assert!(a.allows("root", Close, None));
        assert!(!a.allows("alice", Read, None));
        assert!(!Access::default().allows("root", Read, Some("x")));
    }

    #[test]
    fn malformed_rules_name_their_line() {
        for (text, line) in [
            ("alice read\n", 1),
            ("\n# c\nalice read,fly x\n", 3),
            ("a/b read x\n", 1),
            ("alice read x/**/**/y$\n", 1),
        ] {
            let Err(NetError::Config(why)) = Access::parse(text) else {
                panic!("{text:?} parsed");
            };
            assert!(why.contains(&format!("line {line}")), "{why}");
        }
    }
}
