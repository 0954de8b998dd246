"""Named custom logic that diopi_functions.yaml refers to: output inference rules
(``shape:``, in ``shapes``) and custom kernels (``impl:``)."""
