"""Moved to :mod:`mmevt.converters.rmt` (reading, choosing and checking the authors' files)
and :mod:`mmevt.converters.rmt_keys` (the key renames); this alias stays for one release."""
from ..converters.rmt import (AUTHORS_OUT_NORM_EPS, AUTHORS_SAFE_GLOBALS,  # noqa: F401
                              README_TOP1, README_TOP1_TOKEN_LABEL, README_WEIGHTS, WEIGHTS,
                              UntrustedCheckpointError, check_keys, check_relpos,
                              detect_arch, detect_layout, load_authors_checkpoint,
                              select_weights, unwrap_state_dict)
from ..converters.rmt_keys import convert_rmt, convert_rmt_dense, convert_to_rmt  # noqa: F401
