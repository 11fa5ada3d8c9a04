//! The exceptions `progscore._native` raises (the Python package's
//! `ProgscoreError` and its kinds), in a room of their own so that every
//! module raises them without importing the module's root.

use pyo3::create_exception;
use pyo3::exceptions::PyException;

create_exception!(
    _native,
    ProgscoreError,
    PyException,
    "Any error of progscore."
);
create_exception!(
    _native,
    InvalidExpectationError,
    ProgscoreError,
    "An expectation (or a profile, or an invocation) is invalid; nothing ran."
);
create_exception!(
    _native,
    SandboxRefusedError,
    ProgscoreError,
    "The sandbox refused the run: nothing of the program's behaviour is known, nothing was stored."
);
create_exception!(
    _native,
    ReplayRefusedError,
    ProgscoreError,
    "A replay was refused (not stored, tampered, other profile or invocations); nothing was written."
);
create_exception!(
    _native,
    EvidenceStoreError,
    ProgscoreError,
    "The evidence store failed."
);
