//! Tags between Python and the coordination layer: an `int`, a `str`, or a tuple of them
//! goes in; a tuple always comes out, so a step unpacks its tag the same way whatever the
//! environment put.

use pyo3::prelude::*;
use pyo3::types::{PyInt, PyString, PyTuple};
use stampede_coord::{Tag, TagPart};

use crate::errors;

fn part(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<TagPart> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(TagPart::Str(s.to_str()?.into()));
    }
    if obj.is_instance_of::<PyInt>() {
        return obj
            .extract::<i64>()
            .map(TagPart::Int)
            .map_err(|_| errors::invalid(py, format!("tag part {obj} does not fit in 64 bits")));
    }
    Err(errors::invalid(
        py,
        format!(
            "a tag is an int, a str or a tuple of them, not {}",
            obj.get_type()
        ),
    ))
}

/// The tag a Python value names.
pub(crate) fn to_tag(obj: &Bound<'_, PyAny>) -> PyResult<Tag> {
    let py = obj.py();
    if let Ok(t) = obj.cast::<PyTuple>() {
        let parts = t
            .iter()
            .map(|p| part(py, &p))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(Tag::new(parts));
    }
    Ok(Tag::new([part(py, obj)?]))
}

/// A tag as a Python tuple.
pub(crate) fn to_py<'py>(py: Python<'py>, tag: &Tag) -> PyResult<Bound<'py, PyTuple>> {
    let parts = tag.parts().iter().map(|p| match p {
        TagPart::Int(i) => Ok(i.into_pyobject(py)?.into_any()),
        TagPart::Str(s) => Ok(PyString::new(py, s).into_any()),
    });
    PyTuple::new(py, parts.collect::<PyResult<Vec<_>>>()?)
}
