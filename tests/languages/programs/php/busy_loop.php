<?php
// Probe: spin forever on the CPU.
while (true) {}
