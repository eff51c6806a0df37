/* Board support for PlatformIO's espidf framework (ESP32-S3-DevKitC-1, ESP32-C3-DevKitM-1):
 * ESP-IDF calls app_main from its main task, which calls the application's main(); the console
 * is ESP-IDF's stdout (UART0 through the board's USB-serial bridge); cycles are
 * esp_cpu_get_cycle_count() (CCOUNT on the S3; the C3 has no mcycle, ESP-IDF reads its own
 * counter); the clock is what ESP-IDF configured (sdkconfig: CONFIG_ESP_DEFAULT_CPU_FREQ_MHZ);
 * the stack is the main task's, whose high-water mark FreeRTOS keeps (it fills new stacks).
 *
 * ESP-IDF's task watchdog (sdkconfig: on, 5 s) watches each core's idle task: an inference of a
 * few seconds in this task starves the idle task of its core, and the watchdog reports it
 * (a backtrace on the console; a reset where the sdkconfig makes watchdog timeouts panic).
 * While the firmware computes (from msf_board_init to msf_board_end_of_run, and again after each
 * pause there) the idle task of this task's core is left out of the watch (both cores' if the
 * task may run on either) and this task, if subscribed, is unsubscribed; during the pause the
 * sdkconfig's watch is back, and the idle tasks feed it. The watchdog itself is never stopped. */
#if defined(MSF_FRAMEWORK_ESPIDF)
#include <stdio.h>

#include "esp_cpu.h"
#include "esp_rom_sys.h"
#include "esp_task_wdt.h"
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"
#include "sdkconfig.h"

#include "msf/board.h"

#define REPORT_PERIOD_MS 2000u

static uint32_t cycles_last, cycles_high;

#if CONFIG_ESP_TASK_WDT_INIT
static int watch_released, task_was_watched;

/* The idle tasks the sdkconfig has the watchdog watch (what ESP-IDF's start-up subscribes). */
static uint32_t idle_watch(void)
{
    uint32_t mask = 0;
#if CONFIG_ESP_TASK_WDT_CHECK_IDLE_TASK_CPU0
    mask |= 1u << 0;
#endif
#if CONFIG_ESP_TASK_WDT_CHECK_IDLE_TASK_CPU1
    mask |= 1u << 1;
#endif
    return mask;
}

static void watch_idle_tasks(uint32_t mask)
{
    const esp_task_wdt_config_t config = {
        .timeout_ms = CONFIG_ESP_TASK_WDT_TIMEOUT_S * 1000u,
        .idle_core_mask = mask,
#if CONFIG_ESP_TASK_WDT_PANIC
        .trigger_panic = true,
#endif
    };
    (void)esp_task_wdt_reconfigure(&config);   /* ESP_ERR_INVALID_STATE: the app deinit it */
}

/* The firmware is about to compute: its core's idle task will starve, and so may this task. */
static void release_watch(void)
{
    if (watch_released) {
        return;
    }
    const BaseType_t core = xTaskGetCoreID(NULL);
    const uint32_t cores = core == tskNO_AFFINITY ? (1u << CONFIG_FREERTOS_NUMBER_OF_CORES) - 1u
                                                  : 1u << core;
    task_was_watched = esp_task_wdt_status(NULL) == ESP_OK;
    if (task_was_watched) {
        (void)esp_task_wdt_delete(NULL);
    }
    watch_idle_tasks(idle_watch() & ~cores);
    watch_released = 1;
}

static void restore_watch(void)
{
    if (!watch_released) {
        return;
    }
    watch_idle_tasks(idle_watch());
    if (task_was_watched) {
        (void)esp_task_wdt_add(NULL);
    }
    watch_released = 0;
}
#else
static void release_watch(void) {}
static void restore_watch(void) {}
#endif

int main(void);
void app_main(void);
void app_main(void)
{
    (void)main();
}

void msf_board_init(void)
{
    release_watch();
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
    restore_watch();
    vTaskDelay(pdMS_TO_TICKS(REPORT_PERIOD_MS));
    release_watch();           /* the caller may run the model again before its next report */
}
#endif /* MSF_FRAMEWORK_ESPIDF */
