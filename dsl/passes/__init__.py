"""IR passes, one per module, each keeping the IR legal (``verify.verify_structure``).

* ``simplify``: common-subexpression elimination of scalar arithmetic and
  repeated bound checks, then dead-code elimination of unused pure ops.
"""

from .simplify import simplify

__all__ = ["simplify"]
