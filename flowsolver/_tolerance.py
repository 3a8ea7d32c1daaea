"""The one relative tolerance at which two float64 results of the max-min solve are the
same number.

Float64 solves agree with progressive filling to about 1e-12 (``solver._certificate``'s
reference checks); 1e-9 leaves room for the rounding of a million flows summed on one link
while staying far below any difference a model input can make. It is used for:

- the certificate check (``solver._certificate.violation``'s default ``rtol``);
- ties between levels and saturated links in the bottleneck structure (``solver._structure``,
  ``solver._blocks``) and in the event splits' constraints;
- events (``flowsolver.timing``): flows whose time to finish is within it of an event finish
  at it (the default ``rtol`` of ``completion_times`` / ``step_times``), and the same test in
  the completion sensitivities and their event splits;
- ties between NCCL cost-model estimates (``collectives._dual``);
- contested bottlenecks in the conditioning check (``solver._conditioning.TIE``).

It is relative, so it means the same in bytes, seconds or bytes/s.
"""

#: relative tolerance: values closer than this fraction of the larger are equal (see above)
RTOL = 1e-9
