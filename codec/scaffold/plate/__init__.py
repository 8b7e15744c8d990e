"""The background plate, its one owner: what the edge sends of the background and how the
cloud holds it.

* :class:`~codec.scaffold.plate.encoder.PlateEncoder` (the edge): keyframe pictures, plate
  refreshes, periodic plates and refinement tiles, within the rate's budget;
* :class:`~codec.scaffold.plate.decoder.PlateDecoder` (the cloud): the plate held, from those
  pictures and tiles;
* :mod:`~codec.scaffold.plate.background`: the person-free plate (the temporal median);
* :mod:`~codec.scaffold.plate.share`: how much of the budget the plate takes against the
  people;
* :mod:`~codec.scaffold.plate.coding`: the plate's intra coders and tile grid, both sides.

The cloud's upscaling of a plate coded small is the decode pipeline's
(:mod:`codec.reconstruct.superres`, passed to the decoder as a function), and drawing people
over it the reconstructors'.
"""
