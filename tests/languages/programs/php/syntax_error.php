<?php
// Does not parse: php exits 255.
$x = ;
