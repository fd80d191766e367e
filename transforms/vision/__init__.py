"""Vision stage: image decode with limits, perceptual hashes, the MedICaT medical filter,
graphical-abstract typing and de-facto GAs, RunInference model handlers.

Files, in the order a figure meets them:

- ``decode.py``         bytes -> 8-bit RGB with a pixel limit (bombs are row errors)
- ``phash.py``          64-bit perceptual hash
- ``figure_images.py``  FigureRow -> width, height, pHash, image_error
- ``medical.py``        MedICaT stage 1 (keywords, ``medical_keywords.txt``) and the top-K rule
- ``models.py``         torchvision CNNs, the checkpoint file, weights resolution, preprocessing
- ``handlers.py``       the RunInference model handler (classify / embed) and the model in the
                        process that owns it (device, normalisation, precision, OOM halving)
- ``inference.py``      ``ClassifyImages``: (key, image reference) -> probabilities, and the
                        typed ``InferenceOptions`` (device, batch, sharing, precision)
- ``ga_manifest.py``    the ``--ga-manifest`` CSV and the polite GA fetch
- ``ga_match.py``       GA vs figures: Reused / Modified / Original from pixels
- ``ga.py``             GA and de-facto GA on the Paper and the figure rows (``ga_role``)
- ``options.py``        ``VisionOptions`` and the checks made before a build starts
- ``stage.py``          the stage: per-paper measuring, the classifier and GA typing as
                        PTransforms, annotations back to the write stage
"""
