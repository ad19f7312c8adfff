//! The kinds of named things, one table for every layer and face.

/// The kinds of named things: the three containers, and services (a name with metadata
/// and no container). The one table of kinds; the wire format sends [`Kind::code`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// A channel.
    Channel,
    /// A queue.
    Queue,
    /// A register.
    Register,
    /// A service.
    Service,
}

impl Kind {
    /// Every kind, in code order.
    pub const ALL: [Kind; 4] = [Kind::Channel, Kind::Queue, Kind::Register, Kind::Service];

    /// The kind's stable number.
    pub fn code(self) -> u8 {
        match self {
            Kind::Channel => 0,
            Kind::Queue => 1,
            Kind::Register => 2,
            Kind::Service => 3,
        }
    }

    /// The kind with this number.
    pub fn from_code(code: u8) -> Option<Kind> {
        Kind::ALL.get(usize::from(code)).copied()
    }

    /// The kind's name in lower case (`"channel"`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Channel => "channel",
            Kind::Queue => "queue",
            Kind::Register => "register",
            Kind::Service => "service",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
