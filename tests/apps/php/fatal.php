<?php
undefined_function_for_the_test();
