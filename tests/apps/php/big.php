<?php
// 1 MiB, in 16 writes: streamed through rein, never one buffer.
for ($i = 0; $i < 16; $i++) {
    echo str_repeat(chr(97 + $i), 65536);
    flush();
}
