// Probe: allocate and touch memory without bound.
import core.stdc.stdlib : malloc;
void main() {
    enum size_t chunk = 16 << 20;
    for (;;) {
        auto p = cast(ubyte*) malloc(chunk);
        if (p is null) return;
        for (size_t i = 0; i < chunk; i += 4096) p[i] = 1;
    }
}
