//! Which users may create, read, write or close which containers of an address space: its
//! access rules, which the space enforces as the owner of its containers.
//!
//! A space's user is the one its credentials name (`anonymous` without credentials). Every
//! request to an owner travels on a key that ends with the sender's user, and a router or
//! listening peer with access rules has Zenoh refuse, on each authenticated link, requests
//! whose key names another user (`zenoh_rules`), so an owner reached through it knows who
//! asks. An owner binds each requesting space to the first user it saw it with and refuses
//! that space's requests under any other, so no space works another's connections.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use stampede_core::{Permission, StmError};
use zenoh::key_expr::{keyexpr, OwnedKeyExpr};

use crate::error::NetError;
use crate::space::{lock, Shared};
use crate::wire::Request;

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
    fn users(&self) -> impl Iterator<Item = &str> {
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

/// Zenoh access-control settings for a router or listening peer that accepts the users of
/// `credentials` (a `user:password` file): on each user's links, a request to an owner
/// whose key names another user is dropped, in every application. Everything else is
/// allowed.
pub(crate) fn zenoh_rules(
    access: &Access,
    credentials: &Path,
) -> Result<Vec<(String, String)>, NetError> {
    let text = std::fs::read_to_string(credentials).map_err(|e| {
        NetError::Config(format!("credentials file {}: {e}", credentials.display()))
    })?;
    // Only the user names: the passwords stay where they are.
    let mut users: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_once(':').map(|(u, _)| u.trim().to_owned()))
        .filter(|u| !u.is_empty())
        .collect();
    users.extend(access.users().map(str::to_owned));
    users.sort();
    users.dedup();
    for u in &users {
        valid_user(u).map_err(NetError::Config)?;
    }
    let quote = |s: &str| crate::config::json_str(s);
    let mut rules = Vec::new();
    let mut subjects = Vec::new();
    let mut policies = Vec::new();
    for (i, user) in users.iter().enumerate() {
        let others: Vec<String> = users
            .iter()
            .chain(std::iter::once(&ANONYMOUS.to_owned()))
            .filter(|o| *o != user)
            .flat_map(|o| {
                TO_OWNER
                    .iter()
                    .map(move |f| quote(&format!("stampede/*/{f}/*/{o}")))
            })
            .collect();
        if others.is_empty() {
            continue;
        }
        rules.push(format!(
            "{{id:\"not-{i}\",messages:[\"put\",\"query\"],flows:[\"ingress\"],\
             permission:\"deny\",key_exprs:[{}]}}",
            others.join(",")
        ));
        subjects.push(format!("{{id:\"user-{i}\",usernames:[{}]}}", quote(user)));
        policies.push(format!("{{rules:[\"not-{i}\"],subjects:[\"user-{i}\"]}}"));
    }
    Ok(vec![
        ("access_control/enabled".into(), "true".into()),
        (
            "access_control/default_permission".into(),
            "\"allow\"".into(),
        ),
        (
            "access_control/rules".into(),
            format!("[{}]", rules.join(",")),
        ),
        (
            "access_control/subjects".into(),
            format!("[{}]", subjects.join(",")),
        ),
        (
            "access_control/policies".into(),
            format!("[{}]", policies.join(",")),
        ),
    ])
}

/// The owner's side: who each requesting space is, and what was refused.
#[derive(Default)]
pub(crate) struct Guard {
    /// The user each space that sent requests here first came with.
    bound: Mutex<HashMap<String, String>>,
}

impl Guard {
    /// Checks that `space` asks as the user it first asked as.
    pub(crate) fn bind(&self, space: &str, user: &str) -> bool {
        let mut bound = lock(&self.bound);
        bound
            .entry(space.to_owned())
            .or_insert_with(|| user.to_owned())
            == user
    }

    /// Forgets a space that left.
    pub(crate) fn forget(&self, space: &str) {
        lock(&self.bound).remove(space);
    }
}

/// The user a request to an owner came from: the last chunk of its key.
pub(crate) fn sender(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or("")
}

/// Whether `user` may make request `req` here: what the owner's rules allow, from the space
/// that first asked as `user`. A refusal is counted and logged.
pub(crate) fn check(sh: &Shared, user: &str, req: &Request) -> Result<(), StmError> {
    use Permission::{Close, Create, Read, Write};
    let Some(rules) = &sh.cfg.access else {
        return Ok(());
    };
    let (space, op, target) = match req {
        Request::Attach {
            task,
            container,
            input,
            ..
        } => (
            Some(&task.space),
            if *input { Read } else { Write },
            Target::Id(*container),
        ),
        Request::Put { task, .. } => (Some(&task.space), Write, Target::Connection),
        Request::Get { task, .. }
        | Request::Take { task, .. }
        | Request::Consume { task, .. }
        | Request::Seen { task, .. }
        | Request::Visible { task, .. }
        | Request::Detach { task, .. } => (Some(&task.space), Read, Target::Connection),
        Request::Subscribe {
            space, container, ..
        } => (Some(space), Read, Target::Id(*container)),
        Request::Unsubscribe { space, .. } => (Some(space), Read, Target::Connection),
        Request::Close { container } => (None, Close, Target::Id(*container)),
        Request::Create { name, .. } => (None, Create, Target::Name(name)),
        Request::Explain { .. } => return Ok(()),
    };
    let name = match target {
        Target::Id(id) => match lock(&sh.owned).get(&id) {
            Some((_, name)) => name.clone().ok_or_else(|| format!("#{id}")),
            // Unknown here: the request fails as such.
            None => return Ok(()),
        },
        Target::Name("") => Err("a new unnamed container".to_owned()),
        Target::Name(n) => Ok(n.to_owned()),
        Target::Connection => Err("a connection of another user's space".to_owned()),
    };
    let impostor = space.is_some_and(|s| !sh.guard.bind(s, user));
    let allowed = match (&target, &name) {
        (Target::Connection, _) => true,
        (_, Ok(n)) => rules.allows(user, op, Some(n)),
        (_, Err(_)) => rules.allows(user, op, None),
    };
    if allowed && !impostor {
        return Ok(());
    }
    Err(refuse(
        sh,
        user,
        op,
        name.unwrap_or_else(|label| label),
        impostor,
    ))
}

/// The refusal of a pipelined put that `user` sent for a space that first asked here as
/// another user.
pub(crate) fn impostor(sh: &Shared, user: &str) -> StmError {
    refuse(
        sh,
        user,
        Permission::Write,
        "a connection of another user's space".to_owned(),
        true,
    )
}

fn refuse(sh: &Shared, user: &str, op: Permission, container: String, impostor: bool) -> StmError {
    sh.counters.denied.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(user, op = op.name(), container, impostor, "request denied");
    StmError::Denied {
        user: user.to_owned(),
        op,
        container,
    }
}

/// What a request names.
enum Target<'a> {
    Id(u64),
    Name(&'a str),
    /// One of the sender's connections, which was checked when attached.
    Connection,
}

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
