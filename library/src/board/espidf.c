/* Board support for PlatformIO's espidf framework (ESP32-S3-DevKitC-1, ESP32-C3-DevKitM-1):
 * ESP-IDF calls app_main from its main task, which calls the application's main(); the console
 * is ESP-IDF's stdout (UART0 through the board's USB-serial bridge); cycles are
 * esp_cpu_get_cycle_count() (CCOUNT on the S3; the C3 has no mcycle, ESP-IDF reads its own
 * counter); the clock is what ESP-IDF configured (sdkconfig: CONFIG_ESP_DEFAULT_CPU_FREQ_MHZ);
 * the stack is the main task's, whose high-water mark FreeRTOS keeps (it fills new stacks). */
#if defined(MSF_FRAMEWORK_ESPIDF)
#include <stdio.h>

#include "esp_cpu.h"
#include "esp_rom_sys.h"
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"
#include "sdkconfig.h"

#include "msf/board.h"

#define REPORT_PERIOD_MS 2000u

static uint32_t cycles_last, cycles_high;

int main(void);
void app_main(void);
void app_main(void)
{
    (void)main();
}

void msf_board_init(void)
{
    cycles_last = (uint32_t)esp_cpu_get_cycle_count();
    cycles_high = 0;
}

void msf_board_puts(const char *s)
{
    fputs(s, stdout);
    fflush(stdout);
}

uint64_t msf_board_cycles(void)
{
    uint32_t now = (uint32_t)esp_cpu_get_cycle_count();
    cycles_high += now < cycles_last;   /* 32-bit counter: read at least once per wrap */
    cycles_last = now;
    return ((uint64_t)cycles_high << 32) | now;
}

const char *msf_board_cycles_source(void)
{
    return "esp_cpu";
}

uint32_t msf_board_cpu_hz(void)
{
    return esp_rom_get_cpu_ticks_per_us() * 1000000u;
}

size_t msf_board_stack_size(void)
{
    return CONFIG_ESP_MAIN_TASK_STACK_SIZE;
}

/* ESP-IDF's FreeRTOS counts the high-water mark in bytes (StackType_t is one byte). */
size_t msf_board_stack_used(void)
{
    return CONFIG_ESP_MAIN_TASK_STACK_SIZE - (size_t)uxTaskGetStackHighWaterMark(NULL);
}

void msf_board_end_of_run(int status)
{
    (void)status;
    vTaskDelay(pdMS_TO_TICKS(REPORT_PERIOD_MS));
}
#endif /* MSF_FRAMEWORK_ESPIDF */
