//! Diagnostics: what the parser and the checker report, rendered like a compiler's
//! (`error[code]: message`, `file:line:col`, the source line and a caret under the span).

use std::fmt;
use std::sync::Arc;

use codespan_reporting::diagnostic::{Diagnostic as Report, Label as Mark};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, Config};

use super::ast::Span;

/// One problem found in a program, with the span it concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// A stable code, e.g. `S0301`; docs/snet.md lists them.
    pub code: &'static str,
    pub message: String,
    /// The main span and what to say under it.
    pub span: Span,
    pub label: String,
    /// Related places (a declaration, the other branch of a choice, ...).
    pub related: Vec<(Span, String)>,
    pub notes: Vec<String>,
}

impl Diagnostic {
    pub(crate) fn new(
        code: &'static str,
        message: impl Into<String>,
        span: Span,
        label: impl Into<String>,
    ) -> Self {
        Diagnostic {
            code,
            message: message.into(),
            span,
            label: label.into(),
            related: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub(crate) fn related(mut self, span: Span, label: impl Into<String>) -> Self {
        self.related.push((span, label.into()));
        self
    }

    pub(crate) fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
}

/// Every diagnostic of one program, with the source they point into; `Display` renders them.
#[derive(Clone, Debug)]
pub struct Diagnostics {
    file: Arc<str>,
    source: Arc<str>,
    list: Vec<Diagnostic>,
}

impl Diagnostics {
    pub(crate) fn new(file: Arc<str>, source: Arc<str>, list: Vec<Diagnostic>) -> Self {
        Diagnostics { file, source, list }
    }

    /// The file name the diagnostics quote (`<builder:name>` for a builder's network).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The source text the spans index.
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn list(&self) -> &[Diagnostic] {
        &self.list
    }

    /// The 1-based line and column of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let before = &self.source[..offset.min(self.source.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, col)
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = SimpleFile::new(self.file.as_ref(), self.source.as_ref());
        let config = Config::default();
        for d in &self.list {
            let mut labels =
                vec![Mark::primary((), d.span.start..d.span.end).with_message(&d.label)];
            labels.extend(
                d.related
                    .iter()
                    .map(|(s, m)| Mark::secondary((), s.start..s.end).with_message(m)),
            );
            let report = Report::error()
                .with_code(d.code)
                .with_message(&d.message)
                .with_labels(labels)
                .with_notes(d.notes.clone());
            let text = term::emit_into_string(&config, &file, &report).map_err(|_| fmt::Error)?;
            f.write_str(&text)?;
        }
        Ok(())
    }
}
