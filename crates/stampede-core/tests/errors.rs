//! The stable error codes: one number and name per situation, and every error rebuilt
//! exactly from its code, figures and detail (what crosses address spaces and languages).

use std::collections::HashSet;

use stampede_core::{ErrorCode, GetError, Neighbors, Permission, PutErrorKind, StmError, ZoneId};

#[test]
fn codes_are_unique_and_round_trip_through_their_numbers() {
    let mut numbers = HashSet::new();
    let mut names = HashSet::new();
    for &c in ErrorCode::ALL {
        assert!(numbers.insert(c as u8), "{c} reuses a number");
        assert!(names.insert(c.name()), "{c} reuses a name");
        assert_eq!(ErrorCode::from_u8(c as u8), Some(c));
    }
    assert_eq!(ErrorCode::from_u8(0), None);
    assert_eq!(ErrorCode::BelowVisibility as u8, 9, "numbers never change");
    assert_eq!(ErrorCode::Interrupted.to_string(), "interrupted");
}

#[test]
fn every_error_is_rebuilt_from_its_code() {
    let stm = [
        StmError::BelowVisibility {
            requested: 1,
            visibility: 2,
        },
        StmError::ZoneMismatch {
            task: ZoneId(3),
            container: ZoneId(4),
        },
        StmError::Detached,
        StmError::TaskExited,
        StmError::UnknownTicket(5),
        StmError::Closed,
        StmError::NameTaken("a/b".into()),
        StmError::TooManyConnections(64),
        StmError::InvalidArgument("why".into()),
        StmError::Unreachable("where".into()),
        StmError::Denied {
            user: "bob".into(),
            op: Permission::Write,
            container: "video/frames".into(),
        },
    ];
    for e in stm {
        let (code, figures) = e.code();
        assert_eq!(StmError::from_code(code, figures, &e.detail()), Some(e));
    }
    let n = Neighbors {
        below: Some(1),
        above: None,
    };
    for e in [
        GetError::Unavailable(n),
        GetError::Timeout(n),
        GetError::Gone(9),
        GetError::Closed,
        GetError::Detached,
        GetError::Unreachable,
    ] {
        let (code, figures) = e.code();
        assert_eq!(GetError::from_code(code, figures), Some(e));
    }
    for k in [
        PutErrorKind::Full,
        PutErrorKind::DuplicateTimestamp,
        PutErrorKind::BelowVisibility { visibility: 4 },
        PutErrorKind::InvalidTimestamp,
        PutErrorKind::ZeroConsumers,
        PutErrorKind::Closed,
        PutErrorKind::Detached,
        PutErrorKind::Unreachable,
        PutErrorKind::Interrupted,
    ] {
        let (code, a) = k.code();
        assert_eq!(PutErrorKind::from_code(code, a), Some(k));
    }
    // A code that no operation of a kind fails with is refused, not guessed.
    assert_eq!(PutErrorKind::from_code(ErrorCode::Gone, 0), None);
    assert_eq!(GetError::from_code(ErrorCode::Full, (0, 0)), None);
    assert_eq!(StmError::from_code(ErrorCode::Full, (0, 0), ""), None);
}
