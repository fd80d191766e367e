"""Vision stage: image decode with limits, perceptual hashes, the MedICaT medical filter,
graphical-abstract typing and de-facto GAs, RunInference model handlers. The stage itself
(per-paper measuring, the classifier and GA typing as PTransforms) is ``stage.py``."""
